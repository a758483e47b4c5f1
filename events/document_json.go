package events

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
)

// The JSON form of the published documents by schema: schema 1 writes ids
// as JSON numbers, schema 2 (SchemaStringIDs) as strings, and each reads
// only its own form, so a document says by its "schema" how to read it.

// docID is an id as a document of schema holds it.
type docID struct {
	v      *int64
	schema int
}

func (d docID) MarshalJSON() ([]byte, error) {
	if d.schema >= SchemaStringIDs {
		return []byte(`"` + strconv.FormatInt(*d.v, 10) + `"`), nil
	}
	return []byte(strconv.FormatInt(*d.v, 10)), nil
}

func (d docID) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	text := string(b)
	if d.schema >= SchemaStringIDs {
		s, err := strconv.Unquote(text)
		if err != nil || len(b) < 2 || b[0] != '"' {
			return fmt.Errorf("an id of schema %d must be a JSON string, not %s", d.schema, text)
		}
		text = s
	} else if len(b) > 0 && b[0] == '"' {
		return fmt.Errorf("an id of schema %d must be a JSON number, not %s", d.schema, text)
	}
	n, err := strconv.ParseInt(text, 10, 64)
	if err != nil {
		return fmt.Errorf("id %s: %w", text, err)
	}
	*d.v = n
	return nil
}

// schemaOf reads the "schema" of a document (0 when absent).
func schemaOf(b []byte) (int, error) {
	var probe struct {
		Schema *int `json:"schema"`
	}
	if err := json.Unmarshal(b, &probe); err != nil {
		return 0, err
	}
	if probe.Schema == nil {
		return 0, nil
	}
	return *probe.Schema, nil
}

// publishedJSON is Published without its methods.
type publishedJSON Published

// MarshalJSON writes p's ids as its Schema has them.
func (p Published) MarshalJSON() ([]byte, error) {
	s := p.Schema
	return json.Marshal(struct {
		Schema   int   `json:"schema"`
		ID       docID `json:"id"`
		QueueID  docID `json:"queue_id"`
		OriginID docID `json:"origin_id"`
		publishedJSON
	}{s, docID{&p.ID, s}, docID{&p.QueueID, s}, docID{&p.OriginID, s}, publishedJSON(p)})
}

// UnmarshalJSON reads a document of either schema.
func (p *Published) UnmarshalJSON(b []byte) error {
	s, err := schemaOf(b)
	if err != nil {
		return err
	}
	var d publishedJSON
	aux := struct {
		ID       docID `json:"id"`
		QueueID  docID `json:"queue_id"`
		OriginID docID `json:"origin_id"`
		*publishedJSON
	}{docID{&d.ID, s}, docID{&d.QueueID, s}, docID{&d.OriginID, s}, &d}
	if err := json.Unmarshal(b, &aux); err != nil {
		return err
	}
	*p = Published(d)
	return nil
}

// notifierJSON is NotifierStatus without its methods.
type notifierJSON NotifierStatus

// MarshalJSON writes s's ids as its Schema has them.
func (s NotifierStatus) MarshalJSON() ([]byte, error) {
	v := s.Schema
	return json.Marshal(struct {
		ID             docID `json:"id"`
		NotificationID docID `json:"notification_id"`
		notifierJSON
	}{docID{&s.ID, v}, docID{&s.NotificationID, v}, notifierJSON(s)})
}

// UnmarshalJSON reads a document of either schema.
func (s *NotifierStatus) UnmarshalJSON(b []byte) error {
	v, err := schemaOf(b)
	if err != nil {
		return err
	}
	var d notifierJSON
	aux := struct {
		ID             docID `json:"id"`
		NotificationID docID `json:"notification_id"`
		*notifierJSON
	}{docID{&d.ID, v}, docID{&d.NotificationID, v}, &d}
	if err := json.Unmarshal(b, &aux); err != nil {
		return err
	}
	*s = NotifierStatus(d)
	return nil
}

// ParseID reads an id of a document of either schema: a JSON number or a
// JSON string of decimal digits.
func ParseID(raw json.RawMessage) (int64, error) {
	if len(raw) == 0 {
		return 0, errors.New("no id")
	}
	var v int64
	schema := SchemaNumericIDs
	if raw[0] == '"' {
		schema = SchemaStringIDs
	}
	if err := (docID{&v, schema}).UnmarshalJSON(raw); err != nil {
		return 0, err
	}
	return v, nil
}
