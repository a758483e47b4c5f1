// A durable JetStream consumer of pgrelay's status events, schema 2
// (docs/events.md): every id is a string, exact in JavaScript, and each
// message carries its CloudEvents attributes as ce- headers.
import { AckPolicy, jetstream, jetstreamManager } from "@nats-io/jetstream";

const ATTRIBUTES = ["ce-specversion", "ce-id", "ce-source", "ce-type", "ce-time", "ce-subject", "content-type"];

// subscribe calls handle(doc, attrs, info) for each event of the stream, in
// stream order, and acknowledges it once handle returns. A message may come
// again (at least once): handle must be idempotent on doc.id. It returns
// the consumer's messages: stop() ends it, closed() resolves when it ended.
export async function subscribe(nc, { stream = "PGRELAY_EVENTS", durable, filter = "pgrelay.>", handle }) {
  const jsm = await jetstreamManager(nc);
  await jsm.consumers.add(stream, {
    durable_name: durable, // remembers what it acknowledged across restarts
    filter_subject: filter,
    ack_policy: AckPolicy.Explicit,
  });
  const consumer = await jetstream(nc).consumers.get(stream, durable);
  const messages = await consumer.consume();
  (async () => {
    for await (const m of messages) {
      const doc = m.json(); // {"schema": 2, "id": "122565803450040321", ...}
      if (doc.schema !== 2) {
        m.term(); // schema 1: numeric ids, which JSON.parse rounds
        continue;
      }
      const attrs = Object.fromEntries(ATTRIBUTES.map((k) => [k, m.headers?.get(k) ?? null]));
      await handle(doc, attrs, m.info);
      m.ack();
    }
  })();
  return messages;
}
