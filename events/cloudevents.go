package events

import (
	"regexp"
	"strconv"
	"time"
)

// CloudEvents 1.0 attributes of the status events, in binary content mode:
// the document is the message's data and each attribute a "ce-" header
// beside it (docs/events.md, "CloudEvents").
const (
	// CESpecVersion is the CloudEvents version of the attributes.
	CESpecVersion = "1.0"
	// CETypePrefix namespaces the types: CETypePrefix + "event.succeeded",
	// CETypePrefix + "notifier.sent".
	CETypePrefix = "dev.pgrelay."
	// ContentType is the media type of every document.
	ContentType = "application/json"
	// ClusterNameMax bounds pgrelay.settings.cluster_name (the CHECK of
	// migration 0018 says the same): a CloudEvents source stays short.
	ClusterNameMax = 63
)

// clusterNameRe is the form of a cluster name: a URI authority as it is.
var clusterNameRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$`)

// ValidClusterName reports whether s may name an installation.
func ValidClusterName(s string) bool { return clusterNameRe.MatchString(s) }

// CESource is the CloudEvents source of what node of the installation
// cluster publishes: pgrelay://<cluster>/node/<node>.
func CESource(cluster string, node int) string {
	return "pgrelay://" + cluster + "/node/" + strconv.Itoa(node)
}

// CEType is the CloudEvents type of a log event of kind k.
func CEType(k Kind) string { return CETypePrefix + "event." + string(k) }

// CENotifierType is the CloudEvents type of a notifier status change.
func CENotifierType(status string) string { return CETypePrefix + "notifier." + status }

// Header is one message header.
type Header struct{ Key, Value string }

// CEHeaders are the binary-mode headers of a document: its id, source,
// type, time, the channel as subject, and its content type.
func CEHeaders(id int64, source, typ string, at time.Time, channel string) []Header {
	return []Header{
		{"ce-specversion", CESpecVersion},
		{"ce-id", strconv.FormatInt(id, 10)},
		{"ce-source", source},
		{"ce-type", typ},
		{"ce-time", at.UTC().Format(time.RFC3339Nano)},
		{"ce-subject", channel},
		{"content-type", ContentType},
	}
}

// HeadersSize is what hs take of a message's size on the wire (NATS counts
// headers in its max payload): "Key: Value\r\n" each, and the version line
// and blank line that frame them.
func HeadersSize(hs []Header) int {
	n := len("NATS/1.0\r\n\r\n")
	for _, h := range hs {
		n += len(h.Key) + len(": ") + len(h.Value) + len("\r\n")
	}
	return n
}
