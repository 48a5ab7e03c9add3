package main

import (
	"bytes"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// proxy is a TCP proxy a test puts between clients and hosts, as a load balancer
// would be: each connection goes to the first host that takes it, and the test can
// drop every connection at once, or a WebSocket as it carries some bytes.
type proxy struct {
	t     testing.TB
	ln    net.Listener
	mu    sync.Mutex
	hosts []string // host:port
	conns map[net.Conn]bool
	// cut is a one-shot trigger: the next read of a WebSocket, after its handshake,
	// towards the host (toHost) or the client, that contains match and is at least
	// minLen bytes long is not passed on, and its connection is dropped.
	cut *cutTrigger
	// cutDone is closed when the trigger fired.
	cutDone chan struct{}
}

type cutTrigger struct {
	toHost bool
	match  string
	minLen int
}

// startProxy starts a proxy to hosts (URLs or host:port), stopped when the test ends.
func startProxy(t testing.TB, hosts ...string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{t: t, ln: ln, conns: map[net.Conn]bool{}}
	p.route(hosts...)
	go p.serve()
	t.Cleanup(func() {
		ln.Close()
		p.drop()
	})
	return p
}

// url is the proxy's address as an http URL.
func (p *proxy) url() string { return "http://" + p.ln.Addr().String() }

// route sends new connections to hosts from now on; none refuses them (they are
// accepted and closed at once, as a load balancer with no host up does).
func (p *proxy) route(hosts ...string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.hosts = p.hosts[:0]
	for _, h := range hosts {
		p.hosts = append(p.hosts, strings.TrimPrefix(h, "http://"))
	}
}

// drop closes every connection open through the proxy, and returns how many pairs
// there were.
func (p *proxy) drop() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.Close()
	}
	n := len(p.conns) / 2
	clear(p.conns)
	return n
}

// cutOn arms the trigger; the channel returned is closed when it fired.
func (p *proxy) cutOn(toHost bool, match string, minLen int) <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = &cutTrigger{toHost: toHost, match: match, minLen: minLen}
	p.cutDone = make(chan struct{})
	return p.cutDone
}

func (p *proxy) serve() {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		go p.relay(client)
	}
}

func (p *proxy) relay(client net.Conn) {
	p.mu.Lock()
	hosts := append([]string(nil), p.hosts...)
	p.mu.Unlock()
	var host net.Conn
	for _, h := range hosts {
		if c, err := net.DialTimeout("tcp", h, time.Second); err == nil {
			host = c
			break
		}
	}
	if host == nil {
		client.Close()
		return
	}
	p.mu.Lock()
	p.conns[client], p.conns[host] = true, true
	p.mu.Unlock()
	var ws atomic.Bool
	go p.pipe(host, client, true, &ws)
	p.pipe(client, host, false, &ws)
}

// pipe copies from src to dst until either ends, then closes both. The first read
// towards the host, a request's head, tells whether the pair is a WebSocket.
func (p *proxy) pipe(dst, src net.Conn, toHost bool, ws *atomic.Bool) {
	defer func() {
		p.mu.Lock()
		delete(p.conns, src)
		delete(p.conns, dst)
		p.mu.Unlock()
		src.Close()
		dst.Close()
	}()
	buf := make([]byte, 64<<10)
	for first := true; ; first = false {
		n, err := src.Read(buf)
		if toHost && first {
			ws.Store(bytes.Contains(bytes.ToLower(buf[:n]), []byte("upgrade: websocket")))
		} else if n > 0 && ws.Load() && p.fires(buf[:n], toHost) {
			return
		}
		if n > 0 {
			if _, err := dst.Write(buf[:n]); err != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// fires reports whether the bytes read set the trigger off, disarming it.
func (p *proxy) fires(b []byte, toHost bool) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := p.cut
	if c == nil || c.toHost != toHost || len(b) < c.minLen || !bytes.Contains(b, []byte(c.match)) {
		return false
	}
	p.cut = nil
	close(p.cutDone)
	return true
}
