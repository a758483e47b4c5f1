package bench_test

import (
	"context"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
)

// chartsJS returns, per chart of the report (its h2), how many of its
// drawn marks (bars, lines, points) the browser laid out with a size.
const chartsJS = `(() => {
	const out = {};
	for (const h of document.querySelectorAll('h2')) {
		let e = h.nextElementSibling;
		while (e && e.tagName.toLowerCase() !== 'svg' && e.tagName.toLowerCase() !== 'h2') e = e.nextElementSibling;
		if (!e || e.tagName.toLowerCase() !== 'svg') { out[h.textContent] = -1; continue; }
		let n = 0;
		for (const m of e.querySelectorAll('rect.bar, polyline, circle')) {
			const b = m.getBBox();
			if (b.width > 0 || b.height > 0) n++;
		}
		out[h.textContent] = n;
	}
	return out;
})()`

// reportCharts opens the HTML report at path in a headless Chromium
// (/usr/bin/chromium, or chromium on $PATH; skipped without one) and
// returns, per chart title, how many marks it drew (-1: no chart under the
// title).
func reportCharts(t *testing.T, path string) map[string]int {
	t.Helper()
	bin := ""
	for _, name := range []string{"/usr/bin/chromium", "chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			bin = p
			break
		}
	}
	if bin == "" {
		t.Skip("browser check skipped: no chromium found (apt-get install chromium; make test installs it when root)")
	}
	abs, err := filepath.Abs(path)
	require.NoError(t, err)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), chromedp.ExecPath(bin), chromedp.Headless,
		chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1280, 900))
	defer cancelAlloc()
	bctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	// The first action starts the browser, with no timeout on its context.
	require.NoError(t, chromedp.Do(bctx, chromedp.Navigate("about:blank")))
	ctx, cancelRun := context.WithTimeout(bctx, time.Minute)
	defer cancelRun()
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate("file://"+abs)))
	charts, err := chromedp.Run(ctx, chromedp.Evaluate[map[string]int](chartsJS))
	require.NoError(t, err)
	return charts
}
