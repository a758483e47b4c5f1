package web_test

import (
	"context"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay/internal/testenv"
)

// updateScreenshot rewrites docs/console.png from the browser test's
// overview (also PGRELAY_UPDATE_SCREENSHOT=1).
var updateScreenshot = flag.Bool("update-screenshot", false, "rewrite docs/console.png with the browser test's overview")

// chromium is the browser the browser test drives: /usr/bin/chromium (the
// Debian package chromium, which make test installs), else chromium or
// chromium-browser on $PATH; "" when there is none.
func chromium() string {
	for _, name := range []string{"/usr/bin/chromium", "chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// browser starts a headless Chromium for t, with a fresh profile and
// nothing that reaches the network on its own (and opts), closed when t
// ends.
func browser(t *testing.T, opts ...chromedp.ExecAllocatorOption) context.Context {
	t.Helper()
	path := chromium()
	if path == "" {
		t.Skip("browser test skipped: no chromium found (apt-get install chromium; make test installs it when root)")
	}
	all := append([]chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
	}, opts...)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), all...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	// The first run starts the browser, with no timeout on its context.
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate("about:blank")))
	return ctx
}

// run runs actions with a bound.
func run(t *testing.T, ctx context.Context, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	c, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	require.NoError(t, chromedp.Do(c, actions...))
}

// text returns the text of the first element sel matches, once there is
// one. It reads the element in one evaluation: the overview replaces its
// live part every second, and a node found in one call may be gone by the
// next.
func text(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	c, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	_, err := chromedp.Run(c, chromedp.WaitReady(chromedp.CSS(sel)))
	require.NoError(t, err, sel)
	s, err := chromedp.Run(c, chromedp.Evaluate[string](`(() => { const e = document.querySelector(`+
		strconv.Quote(sel)+`); return e ? e.innerText : "no element " + `+strconv.Quote(sel)+` })()`))
	require.NoError(t, err, sel)
	return s
}

// screenshot saves the page as name.png under dir and returns its bytes.
func screenshot(t *testing.T, ctx context.Context, dir, name string) []byte {
	t.Helper()
	c, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	png, err := chromedp.Run(c, chromedp.FullScreenshot(100))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644))
	return png
}

// background is the page body's computed background colour.
func background(t *testing.T, ctx context.Context) string {
	t.Helper()
	c, err := chromedp.Run(ctx, chromedp.Evaluate[string](`getComputedStyle(document.body).backgroundColor`))
	require.NoError(t, err)
	return c
}

// The console in a real browser: the overview shows the database's counts
// and follows them live; an event's page shows its failure as text; a dead
// letter retried from its page runs again on the Processor and succeeds.
func TestConsoleInBrowser(t *testing.T) {
	t.Parallel()
	ctx := browser(t)
	c := newConsole(t, nil)
	failingChannels(c.DB)
	c.Exec("SELECT pgrelay.register('orders', 'SELECT length($1)')")
	c.Exec("SELECT pgrelay.update('orders', p_paused := true)")
	c.Exec("SELECT pgrelay.notify('orders', 'order ' || g) FROM generate_series(1, 7) g")
	c.Exec("SELECT pgrelay.notify('ok', 'ok ' || g) FROM generate_series(1, 40) g")
	origin := testenv.One[int64](t, c.Pool, "SELECT pgrelay.notify('bad', $1)", script)
	c.Exec("SELECT pgrelay_notifier.create_channel('mail', 'Shop <shop@example.com>')")
	c.Exec("SELECT pgrelay_notifier.send('mail', ARRAY['ada@example.com'], 'Your order', 'Thanks')")
	startProcessor(t, c.URL)
	testenv.Eventually(t, 30*time.Second, "the ok events to succeed and the bad one to end a dead letter", func() bool {
		return c.Count("SELECT count(*) FROM pgrelay.log WHERE event = 'succeeded' AND channel = 'ok'") == 40 &&
			c.Count("SELECT count(*) FROM pgrelay.dead_letters") == 1
	})
	shots := t.TempDir()
	// An hour of traffic before this one in the log, for the charts: a
	// rising and falling rate on ok, a few failures on bad.
	c.Exec(`INSERT INTO pgrelay.log (id, queue_id, origin_id, channel, attempt, event, node, at)
		SELECT pgrelay._id_floor(x.at) + x.off + n, x.m * 10000 + x.off + n, x.m * 10000 + x.off + n,
		       x.channel, 1, x.event, 0, x.at
		  FROM (SELECT m, now() - m * interval '1 minute' AS at, ch.channel, ch.event, ch.off,
		               CASE WHEN ch.channel = 'ok' THEN 30 + (25 * sin(m / 8.0))::int
		                    WHEN m % 9 = 0 THEN 4 ELSE 0 END AS k
		          FROM generate_series(1, 59) m,
		               (VALUES ('ok', 'succeeded', 0), ('bad', 'failed', 1000)) ch(channel, event, off)) x,
		       LATERAL generate_series(1, x.k) n`)

	// The overview: the paused channel's 7, then 9 once two more arrive,
	// without a reload.
	run(t, ctx, chromedp.Navigate(c.srv.URL+"/"), chromedp.WaitVisible(chromedp.CSS(`#ch-orders td[data-col="pending"]`)))
	require.Equal(t, "7", text(t, ctx, `#ch-orders td[data-col="pending"]`))
	require.Equal(t, "1", text(t, ctx, `#ch-bad td[data-col="dead"]`))
	c.Exec("SELECT pgrelay.notify('orders', 'order ' || g) FROM generate_series(8, 9) g")
	run(t, ctx, chromedp.Poll[chromedp.Void](
		`document.querySelector('#ch-orders td[data-col="pending"]').textContent.trim() === "9"`,
		chromedp.WithPollingTimeout(20*time.Second)))
	// A link with the keyboard focus keeps it across a refresh.
	run(t, ctx, chromedp.Focus(chromedp.CSS(`#ch-orders a[href="/channels/orders"]`)))
	stamp := text(t, ctx, ".stamp")
	run(t, ctx, chromedp.Poll[chromedp.Void](`document.querySelector(".stamp").textContent !== `+strconv.Quote(stamp),
		chromedp.WithPollingTimeout(20*time.Second)))
	focused, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.activeElement.getAttribute("href") || ""`))
	require.NoError(t, err)
	require.Equal(t, "/channels/orders", focused)
	png := screenshot(t, ctx, shots, "overview")
	if *updateScreenshot || os.Getenv("PGRELAY_UPDATE_SCREENSHOT") == "1" {
		require.NoError(t, os.WriteFile(filepath.Join("..", "..", "docs", "console.png"), png, 0o644))
	}
	// Light, and dark when the system prefers it.
	require.Equal(t, "rgb(255, 255, 255)", background(t, ctx))
	_, err = chromedp.Call(ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
		Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "dark"}}})
	require.NoError(t, err)
	require.Equal(t, "rgb(15, 18, 22)", background(t, ctx))
	screenshot(t, ctx, shots, "overview-dark")
	_, err = chromedp.Call(ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{})
	require.NoError(t, err)

	// The event's page: its failure, markup and all, as text.
	event := c.srv.URL + "/events/" + strconv.FormatInt(origin, 10)
	run(t, ctx, chromedp.Navigate(event), chromedp.WaitVisible(chromedp.CSS("#event-status")))
	require.Equal(t, "gave_up", text(t, ctx, "#event-status"))
	require.Contains(t, text(t, ctx, "#history"), script)
	require.Equal(t, script, text(t, ctx, "#payload"))
	scripts, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("main script").length`))
	require.NoError(t, err)
	require.Zero(t, scripts, "no script element came from the database")
	screenshot(t, ctx, shots, "event")

	for _, p := range []string{"/channels/bad", "/emails"} {
		run(t, ctx, chromedp.Navigate(c.srv.URL+p), chromedp.WaitVisible(chromedp.CSS("main h1")))
		screenshot(t, ctx, shots, filepath.Base(p))
	}

	// The handler is fixed; the dead letter is retried from its page.
	c.Exec(`CREATE OR REPLACE FUNCTION public.fail_with(p text) RETURNS void LANGUAGE plpgsql AS $$BEGIN END$$`)
	dl := testenv.One[int64](t, c.Pool, "SELECT id FROM pgrelay.dead_letters")
	row := "#dead-" + strconv.FormatInt(dl, 10)
	run(t, ctx, chromedp.Navigate(c.srv.URL+"/dead"), chromedp.WaitVisible(chromedp.CSS(row)))
	screenshot(t, ctx, shots, "dead")
	run(t, ctx, chromedp.Click(chromedp.CSS(row+` button[aria-label^="Retry"]`)), chromedp.WaitVisible(chromedp.CSS(".notice")))
	require.Contains(t, text(t, ctx, ".notice"), "queued again")
	testenv.Eventually(t, 30*time.Second, "the retried event to succeed", func() bool {
		return c.Text("SELECT pgrelay.status($1)", origin) == "succeeded"
	})
	run(t, ctx, chromedp.Navigate(event), chromedp.WaitVisible(chromedp.CSS("#event-status")))
	require.Equal(t, "succeeded", text(t, ctx, "#event-status"))
	require.Contains(t, text(t, ctx, "#history"), "retried")
	t.Logf("screenshots in %s", shots)
}
