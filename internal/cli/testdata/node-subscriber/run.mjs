// The tests' harness around subscriber.mjs: it prints each event it is
// handed as one JSON line (the document's ids as received, the CloudEvents
// attributes, the stream sequence) and exits once it has seen as many
// distinct ids as the line "want N" on its standard input asks for.
import { createInterface } from "node:readline";
import { connect } from "@nats-io/transport-node";
import { subscribe } from "./subscriber.mjs";

const nc = await connect({
  servers: process.env.NATS_URL,
  maxReconnectAttempts: -1, // the tests restart the server
  reconnectTimeWait: 100,
});
let want = Infinity;
const seen = new Set();
const messages = await subscribe(nc, {
  durable: process.env.DURABLE ?? "node-subscriber",
  handle: async (doc, attrs, info) => {
    seen.add(doc.id);
    process.stdout.write(JSON.stringify({ seq: info.streamSequence, doc, attrs }) + "\n");
    setTimeout(done, 0); // after subscribe acknowledges this one
  },
});
function done() {
  if (seen.size >= want) messages.stop();
}
const input = createInterface({ input: process.stdin });
input.on("line", (line) => {
  const m = /^want (\d+)$/.exec(line.trim());
  if (m) {
    want = Number(m[1]);
    done();
  }
});
const err = await messages.closed();
input.close(); // stdin would keep the process alive
await nc.drain(); // sends the last acknowledgements
if (err) {
  console.error(err);
  process.exit(1);
}
