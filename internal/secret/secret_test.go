package secret

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestString(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"postgres://relay:s3cret@db.example.com:5432/app":               "postgres://xxxxx@db.example.com:5432/app",
		"postgresql://relay@db/app?sslmode=require":                     "postgresql://xxxxx@db/app?sslmode=require",
		"postgres://db/app?password=s3cret&sslmode=disable":             "postgres://db/app?password=xxxxx&sslmode=disable",
		"host=db user=relay password='s3 cret' dbname=app":              "host=db user=relay password=xxxxx dbname=app",
		"host=db password=s3cret sslpassword=k3y":                       "host=db password=xxxxx sslpassword=xxxxx",
		"smtp://user:p@ss:w/rd@mail.example.com:587?tls=mandatory":      "smtp://xxxxx@mail.example.com:587?tls=mandatory",
		"smtps://user%40example.com:s3cret@mail.example.com":            "smtps://xxxxx@mail.example.com",
		"nats://T0KEN@127.0.0.1:4222":                                   "nats://xxxxx@127.0.0.1:4222",
		"nats://a:b@h1:4222,nats://c:d@h2:4222":                         "nats://xxxxx@h1:4222,nats://xxxxx@h2:4222",
		`parse "nats://user:pa ss@ho st:4222": invalid character " "`:   `parse "nats://xxxxx@ho st:4222": invalid character " "`,
		"connect to nats://127.0.0.1:4222: connection refused":          "connect to nats://127.0.0.1:4222: connection refused",
		"no credentials here: user@example.com wrote":                   "no credentials here: user@example.com wrote",
		"two: postgres://a:b@h/d and smtp://c:d@m:25":                   "two: postgres://xxxxx@h/d and smtp://xxxxx@m:25",
		`{"default": "smtp://user:pass@mail.example.com:587"}`:          `{"default": "smtp://xxxxx@mail.example.com:587"}`,
		"failed to connect to `user=relay database=app`: password=bad!": "failed to connect to `user=relay database=app`: password=xxxxx",
	} {
		assert.Equal(t, want, String(in), in)
	}
}

func TestURL(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"smtp://user:s3cret@host:25?auth=plain":              "smtp://host:25",
		"smtps://user%40example.com:s3cret@mail.example.com": "smtps://mail.example.com",
		"postgres://db/app?password=s3cret#frag":             "postgres://db/app",
		"nats://T0KEN@127.0.0.1:4222":                        "nats://127.0.0.1:4222",
		"smtp://user:pa ss@host:25":                          Unparsable,
		"mail.example.com:25":                                Unparsable,
		"smtp:user:s3cret@host":                              Unparsable,
		"":                                                   Unparsable,
	} {
		assert.Equal(t, want, URL(in), in)
	}
}
