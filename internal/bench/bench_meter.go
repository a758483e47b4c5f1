package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// What a phase costs that does not move with the machine's load, beside
// its WAL (bench_wal.go): the server's CPU time and the round trips of the
// measured system, per event.
//
// Server CPU is the time the PostgreSQL server's processes ran, read from
// /proc: the postmaster's own and every live child's to the nanosecond
// (schedstat), and its reaped children's (a backend that exited during the
// phase) in hundredths of a second. Like the WAL position it is server-wide, so whatever else runs
// on the server meanwhile (autovacuum, the checkpointer, a Processor's
// heartbeat, River's maintenance) counts: it is part of what the system
// costs. It is measured only when the server runs on this machine.
//
// Round trips are counted with --round-trips: the measured systems (the
// Processor, the River harness, the bare loop) then connect through a
// proxy that counts, on each connection, every time the client speaks
// after the server did (a pipeline of statements is one round trip). The
// proxy adds a hop, so the rates of such a run are not compared with
// others; its costs are.
//
// A meter samples both every meterEvery; a phase's cost is the difference
// between its start and its end, interpolated between samples. The River
// harness reports the times its phases started and ended, so its phases
// are measured by the same meter as pgrelay's.

const meterEvery = 20 * time.Millisecond

// userHZ is the unit of the times in /proc/<pid>/stat (USER_HZ, fixed at
// 100 on Linux whatever the kernel's own tick).
const userHZ = 100

// tickNS is one 1/userHZ s in nanoseconds.
const tickNS = int64(1e9 / userHZ)

// meter samples the server's CPU time and the proxy's round trips.
type meter struct {
	postmaster int        // 0: the server's CPU is not measured
	cpu        *cpuReader // reads the postmaster's server
	proxy      *rtProxy   // nil: round trips are not counted
	stop       func()     // stops the sampler
	mu         sync.Mutex // guards samples
	samples    []meterSample
}

type meterSample struct {
	at    time.Time
	cpu   int64 // server CPU, in nanoseconds; -1 when unreadable
	turns int64
}

// startMeter starts sampling the server behind pool (its CPU when it runs
// on this machine) and proxy (may be nil).
func startMeter(ctx context.Context, pool *pgxpool.Pool, proxy *rtProxy) (*meter, error) {
	m := &meter{proxy: proxy}
	var backend int
	if err := pool.QueryRow(ctx, `SELECT pg_catalog.pg_backend_pid()`).Scan(&backend); err != nil {
		return nil, fmt.Errorf("meter: read the backend's pid: %w", err)
	}
	m.postmaster = localPostmaster(backend)
	m.cpu = newCPUReader(m.postmaster)
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	m.stop = func() { cancel(); <-done }
	m.sample()
	go func() {
		defer close(done)
		t := time.NewTicker(meterEvery)
		defer t.Stop()
		for {
			select {
			case <-sctx.Done():
				return
			case <-t.C:
				m.sample()
			}
		}
	}()
	return m, nil
}

// localPostmaster is the postmaster of the backend with pid backend when
// that process runs on this machine, or 0.
func localPostmaster(backend int) int {
	st, err := readStat(backend)
	if err != nil || st.comm != "postgres" {
		return 0
	}
	parent, err := readStat(st.ppid)
	if err != nil || parent.comm != "postgres" {
		return 0
	}
	return st.ppid
}

func (m *meter) close() {
	if m != nil && m.stop != nil {
		m.stop()
		m.stop = nil
	}
}

func (m *meter) sample() {
	s := meterSample{at: time.Now(), cpu: -1}
	if m.postmaster != 0 {
		if cpu, err := m.cpu.read(); err == nil {
			s.cpu = cpu
		}
	}
	if m.proxy != nil {
		s.turns = m.proxy.turns.Load()
	}
	m.mu.Lock()
	m.samples = append(m.samples, s)
	m.mu.Unlock()
}

// mark samples the meter now and returns the sample's time: a phase that
// starts there counts the round trips from there. Between two ticks the
// meter interpolates, which would spread the last round trips of the phase
// before (River's client stopping) into this one.
func (m *meter) mark() time.Time {
	if m == nil {
		return time.Now()
	}
	m.sample()
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.samples[len(m.samples)-1].at
}

// between is the server CPU (µs) and the round trips from from to to; ok
// says whether the CPU was measured.
func (m *meter) between(from, to time.Time) (cpuUS float64, turns float64, cpuOK bool) {
	if m == nil {
		return 0, 0, false
	}
	m.sample() // the latest figures, for a phase that just ended
	m.mu.Lock()
	defer m.mu.Unlock()
	c0, t0, ok0 := m.at(from)
	c1, t1, ok1 := m.at(to)
	return (c1 - c0) / 1e3, t1 - t0, ok0 && ok1
}

// at interpolates the samples at t (under mu).
func (m *meter) at(t time.Time) (cpu, turns float64, ok bool) {
	s := m.samples
	i := 0
	for i < len(s) && !s[i].at.After(t) {
		i++
	}
	switch {
	case i == 0:
		return float64(s[0].cpu), float64(s[0].turns), s[0].cpu >= 0
	case i == len(s):
		l := s[len(s)-1]
		return float64(l.cpu), float64(l.turns), l.cpu >= 0
	}
	a, b := s[i-1], s[i]
	f := float64(t.Sub(a.at)) / float64(b.at.Sub(a.at))
	return float64(a.cpu) + f*float64(b.cpu-a.cpu), float64(a.turns) + f*float64(b.turns-a.turns), a.cpu >= 0 && b.cpu >= 0
}

// procStat is what the bench reads of /proc/<pid>/stat.
type procStat struct {
	comm string
	ppid int
	// own is the process's CPU time, to the nanosecond where
	// /proc/<pid>/schedstat has it (else utime + stime, in ticks of 10 ms);
	// reaped its reaped children's (cutime + cstime, in ticks); cpu both, all
	// in nanoseconds. In ticks alone, a phase of a few tens of milliseconds
	// could read as no CPU at all.
	own, reaped, cpu int64
}

func readStat(pid int) (procStat, error) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return procStat{}, err
	}
	// pid (comm) state ppid … ; comm may hold spaces and parentheses.
	open, end := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
	if open < 0 || end < open {
		return procStat{}, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	f := strings.Fields(string(b[end+1:]))
	// f[0] is the state (field 3); utime is field 14, cstime field 17.
	if len(f) < 15 {
		return procStat{}, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	st := procStat{comm: string(b[open+1 : end])}
	if st.ppid, err = strconv.Atoi(f[1]); err != nil {
		return procStat{}, fmt.Errorf("/proc/%d/stat: ppid: %w", pid, err)
	}
	var ticks [4]int64 // utime, stime, cutime, cstime
	for i, v := range f[11:15] {
		if ticks[i], err = strconv.ParseInt(v, 10, 64); err != nil {
			return procStat{}, fmt.Errorf("/proc/%d/stat: times: %w", pid, err)
		}
	}
	if st.own, err = backendCPU(pid); err != nil {
		// No schedstat (a kernel built without it, or the process just
		// exited): the ticks, coarser but the same time.
		st.own = (ticks[0] + ticks[1]) * tickNS
	}
	st.reaped = (ticks[2] + ticks[3]) * tickNS
	st.cpu = st.own + st.reaped
	return st, nil
}

// cpuReader reads the CPU time of a server's processes, in nanoseconds: the
// postmaster's own, every live child's, and its exited children's. A live
// child's time is read to the nanosecond, an exited one's only in the
// postmaster's ticks, rounded down, so a sum over the processes alone would
// fall back by up to a tick when a child exits. The reader remembers what
// it last read of each child: an exited child counts with that, and the
// ticks add only what it did not see (children that came and went between
// two reads, the last moments of the others).
type cpuReader struct {
	postmaster int
	mu         sync.Mutex
	live       map[int]int64 // each live child's time at the last read
	gone       int64         // the last read time of the children that exited since the first
	reaped0    int64         // the postmaster's reaped children's time at the first read; -1 before
	last       int64         // the last total, which a read never goes below
}

func newCPUReader(postmaster int) *cpuReader {
	return &cpuReader{postmaster: postmaster, reaped0: -1}
}

// read is the server's CPU time now.
func (r *cpuReader) read() (int64, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	pm, err := readStat(r.postmaster)
	if err != nil {
		return 0, err
	}
	kids, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", r.postmaster, r.postmaster))
	if err != nil {
		return 0, err
	}
	live := make(map[int]int64, len(r.live))
	total := pm.own
	for _, f := range strings.Fields(string(kids)) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			return 0, fmt.Errorf("/proc/%d/task/%d/children: %w", r.postmaster, r.postmaster, err)
		}
		st, err := readStat(pid)
		if errors.Is(err, os.ErrNotExist) {
			continue // exited since: below
		}
		if err != nil {
			return 0, err
		}
		live[pid] = st.cpu
		total += st.cpu
	}
	for pid, ns := range r.live {
		if _, ok := live[pid]; !ok {
			r.gone += ns
		}
	}
	r.live = live
	if r.reaped0 < 0 {
		r.reaped0 = pm.reaped
	}
	total += r.gone + max(0, pm.reaped-r.reaped0-r.gone)
	r.last = max(r.last, total)
	return r.last, nil
}

// rtProxy forwards TCP connections to a PostgreSQL server and counts round
// trips: on each connection, every time the client sends after the server
// did, and its first message.
type rtProxy struct {
	ln     net.Listener
	target string
	turns  atomic.Int64
	wg     sync.WaitGroup
	mu     sync.Mutex
	conns  map[net.Conn]struct{}
}

// startProxy listens on 127.0.0.1 and forwards to dbURL's server; URL is
// dbURL through the proxy.
func startProxy(dbURL string) (*rtProxy, string, error) {
	u, err := url.Parse(dbURL)
	if err != nil || u.Host == "" || u.Port() == "" {
		return nil, "", fmt.Errorf("--round-trips: the database URL must name a host and a port (%q)", dbURL)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", fmt.Errorf("--round-trips: listen: %w", err)
	}
	p := &rtProxy{ln: ln, target: u.Host, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	pu := *u
	pu.Host = ln.Addr().String()
	return p, pu.String(), nil
}

func (p *rtProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.serve(c)
		}()
	}
}

func (p *rtProxy) track(c net.Conn, on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if on {
		p.conns[c] = struct{}{}
	} else {
		delete(p.conns, c)
	}
}

// serve copies both ways; the client's first bytes after the server's
// count one round trip.
func (p *rtProxy) serve(client net.Conn) {
	defer client.Close()
	server, err := net.Dial("tcp", p.target)
	if err != nil {
		return // the client sees its connection closed
	}
	defer server.Close()
	p.track(client, true)
	p.track(server, true)
	defer p.track(client, false)
	defer p.track(server, false)
	var serverSpoke atomic.Bool
	serverSpoke.Store(true) // the client's first message counts
	done := make(chan struct{}, 2)
	go func() {
		p.pipe(server, client, func() {
			if serverSpoke.Swap(false) {
				p.turns.Add(1)
			}
		})
		done <- struct{}{}
	}()
	go func() {
		p.pipe(client, server, func() { serverSpoke.Store(true) })
		done <- struct{}{}
	}()
	<-done
	// One side ended: end the other.
	_ = client.Close()
	_ = server.Close()
	<-done
}

// pipe copies from src to dst, calling read before each write.
func (p *rtProxy) pipe(dst, src net.Conn, read func()) {
	buf := make([]byte, 64<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			read()
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return // EOF, or a closed or reset connection: the copy ends
		}
	}
}

// close stops the proxy and ends its connections.
func (p *rtProxy) close() {
	if p == nil {
		return
	}
	_ = p.ln.Close()
	p.mu.Lock()
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// cpuParts is a server's CPU time by kind of process, in nanoseconds.
type cpuParts struct {
	backend int64 // client backends
	send    int64 // walsenders
	apply   int64 // Spock's (or pglogical's) apply workers
	rest    int64 // the postmaster, its reaped children, the other background processes
}

func (c cpuParts) total() int64 { return c.backend + c.send + c.apply + c.rest }

func (c cpuParts) minus(d cpuParts) cpuParts {
	return cpuParts{backend: c.backend - d.backend, send: c.send - d.send, apply: c.apply - d.apply, rest: c.rest - d.rest}
}

// serverCPUParts is serverCPU split by kind of process, told by each live
// child's process title (/proc/<pid>/cmdline: "postgres: walsender …",
// "postgres: spock apply …", a client backend's "postgres: user db
// host(port) …"). A process that exits moves its time to the rest.
func serverCPUParts(postmaster int) (cpuParts, error) {
	pm, err := readStat(postmaster)
	if err != nil {
		return cpuParts{}, err
	}
	parts := cpuParts{rest: pm.cpu}
	kids, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", postmaster, postmaster))
	if err != nil {
		return cpuParts{}, err
	}
	for _, f := range strings.Fields(string(kids)) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			return cpuParts{}, fmt.Errorf("/proc/%d/task/%d/children: %w", postmaster, postmaster, err)
		}
		st, err := readStat(pid)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return cpuParts{}, err
		}
		title, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
		switch t := string(title); {
		case strings.Contains(t, "walsender"):
			parts.send += st.cpu
		case strings.Contains(t, " apply "):
			parts.apply += st.cpu
		case strings.Contains(t, "("): // "postgres: user db host(port) state"
			parts.backend += st.cpu
		default:
			parts.rest += st.cpu
		}
	}
	return parts, nil
}
