package email

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay/internal/devenv"
)

// CheckTargets opens a session per distinct URL and reports each: a server
// that accepts but never greets costs no more than its target's timeout;
// a target shared by the default and a channel is checked once.
func TestCheckTargetsBoundedByTimeout(t *testing.T) {
	t.Parallel()
	s, err := devenv.StartSMTP(devenv.SMTPConfig{})
	require.NoError(t, err)
	defer s.Close()
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer silent.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := silent.Accept()
		if err == nil {
			accepted <- c
		}
	}()
	defer func() {
		select {
		case c := <-accepted:
			_ = c.Close()
		default:
		}
	}()
	start := time.Now()
	res, err := CheckTargets(context.Background(), Config{Default: s.URL(), Channels: map[string]string{
		"a": s.URL(), "b": "smtp://" + silent.Addr().String() + "?timeout=300ms"}})
	require.NoError(t, err)
	require.Less(t, time.Since(start), 5*time.Second)
	require.Len(t, res, 2)
	require.Equal(t, "smtp://"+s.Addr(), res[0].Target)
	require.Equal(t, []string{"default", "a"}, res[0].Serves)
	require.NoError(t, res[0].Err)
	require.Equal(t, []string{"b"}, res[1].Serves)
	require.Error(t, res[1].Err)
	require.Equal(t, 1, s.Sessions())
	require.Zero(t, s.Count(), "nothing is sent")
}
