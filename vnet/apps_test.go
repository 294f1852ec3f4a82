//go:build linux

package vnet_test

// Application-level tests: programs that mix the standard library's
// protocol code (net/http, crypto/tls, encoding/json, compress/gzip) with
// virtual threads and vnet, as a user would write them, with collections
// forced while threads are parked deep inside that code.

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/weftrt/weft/scheduler"
	"github.com/weftrt/weft/vnet"
)

// appsCarriers runs test with one carrier and with several.
func appsCarriers(t *testing.T, opts scheduler.Options, test func(t *testing.T, s *scheduler.Scheduler)) {
	for _, n := range []int{1, 3} {
		t.Run(fmt.Sprintf("carriers=%d", n), func(t *testing.T) {
			leakCheck(t)
			opts.Carriers = n
			s := newSched(t, opts)
			test(t, s)
			shutdown(t, s)
		})
	}
}

// pattern returns n bytes derived from seed, cheap to check.
func pattern(n int, seed uint64) []byte {
	b := make([]byte, n)
	rng := mrand.New(mrand.NewPCG(seed, 7))
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

func sum(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// serveHTTP is a hand-written HTTP/1.1 server loop for one connection, run
// in a virtual thread: it reads requests with http.ReadRequest from a
// bufio.Reader over c and writes responses with (*http.Response).Write,
// keeping the connection alive (and so serving pipelined requests in
// order) until the client closes it or asks to.
//
//	POST /echo    the body back, copied with io.Copy
//	GET /bytes?n=N&seed=S   N bytes of pattern(N, S)
//	POST /sum     the SHA-256 of the body
func serveHTTP(c net.Conn, gc bool) error {
	defer c.Close()
	br := bufio.NewReaderSize(c, 4096)
	bw := bufio.NewWriterSize(c, 4096)
	for n := 0; ; n++ {
		// An idle keep-alive connection waits inside http.ReadRequest,
		// whose deferred calls have runtime records: they move with its
		// frame, so the parked thread holds no carrier.
		req, err := http.ReadRequest(br)
		if err != nil {
			if err == io.EOF || errors.Is(err, net.ErrClosed) || isReset(err) {
				return nil
			}
			return fmt.Errorf("ReadRequest: %w", err)
		}
		if gc && n%3 == 0 {
			runtime.GC()
		}
		resp := &http.Response{
			StatusCode: http.StatusOK,
			ProtoMajor: 1, ProtoMinor: 1,
			Request: req,
			Header:  http.Header{},
			Close:   req.Close,
		}
		switch {
		case req.Method == "POST" && req.URL.Path == "/echo":
			// Stream the body straight back: the response's body is the
			// request's, so the server reads and writes in turns, parking
			// on both directions.
			resp.ContentLength = req.ContentLength
			resp.Body = req.Body
		case req.Method == "GET" && req.URL.Path == "/bytes":
			q := req.URL.Query()
			size, _ := strconv.Atoi(q.Get("n"))
			seed, _ := strconv.ParseUint(q.Get("seed"), 10, 64)
			resp.ContentLength = int64(size)
			resp.Body = io.NopCloser(bytes.NewReader(pattern(size, seed)))
		case req.Method == "POST" && req.URL.Path == "/sum":
			h := sha256.New()
			if _, err := io.Copy(h, req.Body); err != nil {
				return fmt.Errorf("reading body: %w", err)
			}
			s := hex.EncodeToString(h.Sum(nil))
			resp.ContentLength = int64(len(s))
			resp.Body = io.NopCloser(strings.NewReader(s))
		default:
			resp.StatusCode = http.StatusNotFound
			resp.Body = http.NoBody
		}
		if err := resp.Write(bw); err != nil {
			if isReset(err) {
				return nil // the client gave up
			}
			return fmt.Errorf("writing response %d: %w", n, err)
		}
		if err := bw.Flush(); err != nil {
			if isReset(err) {
				return nil
			}
			return fmt.Errorf("flush: %w", err)
		}
		// Whatever the handler left unread goes before the next request.
		io.Copy(io.Discard, req.Body)
		req.Body.Close()
		if req.Close {
			return nil
		}
	}
}

// isReset reports whether err is the peer going away mid-exchange.
func isReset(err error) bool {
	return errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) || errors.Is(err, io.ErrUnexpectedEOF)
}

// acceptLoop accepts connections on ln in a virtual thread and serves each
// in a virtual thread of its own with serve; it returns when ln is closed.
// The per-connection threads' errors are collected in errs.
func acceptLoop(t *testing.T, s *scheduler.Scheduler, ln *vnet.Listener, serve func(net.Conn) error) (stop func() []error) {
	t.Helper()
	var (
		mu    sync.Mutex
		errs  []error
		conns scheduler.WaitGroup
	)
	acc := goVT(t, s, func() error {
		for {
			c, err := ln.Accept()
			if err != nil {
				if errors.Is(err, net.ErrClosed) {
					return nil
				}
				return err
			}
			if _, err := conns.Go(s, func(context.Context) error {
				if err := serve(c); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
				return nil
			}); err != nil {
				c.Close()
				return err
			}
		}
	})
	return func() []error {
		ln.Close()
		if err := acc.Join(); err != nil {
			errs = append(errs, fmt.Errorf("accept loop: %w", err))
		}
		conns.Wait()
		mu.Lock()
		defer mu.Unlock()
		return errs
	}
}

// TestAppsHTTPVThreadServer runs a hand-written HTTP/1.1 server, a virtual
// thread per connection, against net/http clients in goroutines over
// package net: keep-alive requests with large bodies both ways, pipelined
// requests on a raw connection, a slow reader of a large response, and
// clients that give up in the middle of a response.
func TestAppsHTTPVThreadServer(t *testing.T) {
	// One compensation carrier, fewer than the idle keep-alive
	// connections waiting in http.ReadRequest: a pinned wait there would
	// stall the server.
	appsCarriers(t, scheduler.Options{MaxCompensation: 1}, func(t *testing.T, s *scheduler.Scheduler) {
		ln, err := vnet.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		stop := acceptLoop(t, s, ln, func(c net.Conn) error { return serveHTTP(c, true) })
		base := "http://" + ln.Addr().String()

		tr := &http.Transport{MaxIdleConnsPerHost: 4, DisableCompression: true}
		defer tr.CloseIdleConnections()
		client := &http.Client{Transport: tr}

		clients, rounds := 8, 6
		if testing.Short() {
			clients, rounds = 4, 3
		}
		var wg sync.WaitGroup
		errc := make(chan error, clients*rounds*3+10)
		for i := range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for r := range rounds {
					seed := uint64(i*100 + r)
					size := []int{0, 1, 1000, 70_000, 1 << 20}[(i+r)%5]
					body := pattern(size, seed)
					// Echo: the body comes back byte for byte.
					resp, err := client.Post(base+"/echo", "application/octet-stream", bytes.NewReader(body))
					if err != nil {
						errc <- fmt.Errorf("echo %d/%d: %w", i, r, err)
						return
					}
					got, err := io.ReadAll(resp.Body)
					resp.Body.Close()
					if err != nil || !bytes.Equal(got, body) {
						errc <- fmt.Errorf("echo %d/%d: %d bytes back of %d, err %v", i, r, len(got), len(body), err)
						return
					}
					// A body of unknown length (chunked) to hash.
					resp, err = client.Post(base+"/sum", "application/octet-stream", io.MultiReader(bytes.NewReader(body), strings.NewReader("x")))
					if err != nil {
						errc <- fmt.Errorf("sum %d/%d: %w", i, r, err)
						return
					}
					got, err = io.ReadAll(resp.Body)
					resp.Body.Close()
					if want := sum(append(body, 'x')); err != nil || string(got) != want {
						errc <- fmt.Errorf("sum %d/%d: %q, want %q, err %v", i, r, got, want, err)
						return
					}
					// A large response.
					resp, err = client.Get(fmt.Sprintf("%s/bytes?n=%d&seed=%d", base, size*2, seed))
					if err != nil {
						errc <- fmt.Errorf("bytes %d/%d: %w", i, r, err)
						return
					}
					got, err = io.ReadAll(resp.Body)
					resp.Body.Close()
					if err != nil || !bytes.Equal(got, pattern(size*2, seed)) {
						errc <- fmt.Errorf("bytes %d/%d: %d bytes, err %v", i, r, len(got), err)
						return
					}
				}
			}()
		}

		// Pipelining: ten requests in one write, then the ten responses,
		// in order.
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				errc <- err
				return
			}
			defer c.Close()
			var reqs bytes.Buffer
			const n = 10
			for k := range n {
				fmt.Fprintf(&reqs, "GET /bytes?n=%d&seed=%d HTTP/1.1\r\nHost: x\r\n", 5000*k, k)
				if k == n-1 {
					reqs.WriteString("Connection: close\r\n")
				}
				reqs.WriteString("\r\n")
			}
			if _, err := c.Write(reqs.Bytes()); err != nil {
				errc <- err
				return
			}
			br := bufio.NewReader(c)
			for k := range n {
				resp, err := http.ReadResponse(br, nil)
				if err != nil {
					errc <- fmt.Errorf("pipelined response %d: %w", k, err)
					return
				}
				got, err := io.ReadAll(resp.Body)
				if err != nil || !bytes.Equal(got, pattern(5000*k, uint64(k))) {
					errc <- fmt.Errorf("pipelined response %d: %d bytes, err %v", k, len(got), err)
					return
				}
			}
			if _, err := br.ReadByte(); err != io.EOF {
				errc <- fmt.Errorf("after Connection: close: %v, want EOF", err)
			}
		}()

		// A slow reader: the server parks in Write again and again.
		wg.Add(1)
		go func() {
			defer wg.Done()
			size := 4 << 20
			if testing.Short() {
				size = 1 << 20
			}
			resp, err := client.Get(fmt.Sprintf("%s/bytes?n=%d&seed=9", base, size))
			if err != nil {
				errc <- err
				return
			}
			defer resp.Body.Close()
			got := make([]byte, 0, size)
			buf := make([]byte, 64<<10)
			for i := 0; ; i++ {
				n, err := resp.Body.Read(buf)
				got = append(got, buf[:n]...)
				if err == io.EOF {
					break
				}
				if err != nil {
					errc <- err
					return
				}
				if i%8 == 0 {
					time.Sleep(time.Millisecond)
				}
			}
			if !bytes.Equal(got, pattern(size, 9)) {
				errc <- fmt.Errorf("slow reader: %d bytes, corrupted", len(got))
			}
		}()

		// Clients that give up: the server must see an error and end the
		// connection's thread, not hang in Write.
		for k := range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx, cancel := context.WithCancel(context.Background())
				req, _ := http.NewRequestWithContext(ctx, "GET", fmt.Sprintf("%s/bytes?n=%d&seed=1", base, 8<<20), nil)
				resp, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}).Do(req)
				if err != nil {
					cancel()
					errc <- err
					return
				}
				io.CopyN(io.Discard, resp.Body, int64(k*100_000))
				cancel()
				resp.Body.Close()
			}()
		}

		wg.Wait()
		close(errc)
		for err := range errc {
			t.Error(err)
		}
		tr.CloseIdleConnections()
		for _, err := range stop() {
			t.Errorf("server: %v", err)
		}
		noPins(t, s)
	})
}

// TestAppsHTTPServe runs net/http's own server on a vnet listener, so that
// its goroutines use vnet connections (keep-alive, its background read
// that SetReadDeadline in the past interrupts, Shutdown), against a
// net/http client in virtual threads dialling with vnet.
func TestAppsHTTPServe(t *testing.T) {
	leakCheck(t)
	ln, err := vnet.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /echo", func(w http.ResponseWriter, r *http.Request) {
		// Full duplex, so that the handler may read the body after
		// the response has begun (HTTP/1.x's server otherwise discards
		// it once the headers are flushed).
		if err := http.NewResponseController(w).EnableFullDuplex(); err != nil {
			panic(err)
		}
		io.Copy(w, r.Body)
	})
	mux.HandleFunc("GET /bytes", func(w http.ResponseWriter, r *http.Request) {
		size, _ := strconv.Atoi(r.URL.Query().Get("n"))
		seed, _ := strconv.ParseUint(r.URL.Query().Get("seed"), 10, 64)
		w.Header().Set("Content-Length", strconv.Itoa(size))
		w.Write(pattern(size, seed))
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()

	s := newSched(t, scheduler.Options{Carriers: 2})
	tr := &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return vnet.DialContext(ctx, network, addr)
		},
		MaxIdleConnsPerHost: 2,
		DisableCompression:  true,
	}
	client := &http.Client{Transport: tr}
	base := "http://" + ln.Addr().String()
	var g scheduler.WaitGroup
	var errMu sync.Mutex
	var errs []error
	for i := range 6 {
		g.Go(s, func(context.Context) error {
			for r := range 4 {
				size := []int{0, 100, 100_000, 1 << 20}[(i+r)%4]
				body := pattern(size, uint64(i))
				resp, err := client.Post(base+"/echo", "", bytes.NewReader(body))
				if err == nil {
					var got []byte
					got, err = io.ReadAll(resp.Body)
					resp.Body.Close()
					if err == nil && !bytes.Equal(got, body) {
						err = fmt.Errorf("%d bytes back of %d", len(got), len(body))
					}
				}
				if err == nil {
					var resp *http.Response
					resp, err = client.Get(fmt.Sprintf("%s/bytes?n=%d&seed=%d", base, size, r))
					if err == nil {
						var got []byte
						got, err = io.ReadAll(resp.Body)
						resp.Body.Close()
						if err == nil && !bytes.Equal(got, pattern(size, uint64(r))) {
							err = fmt.Errorf("bytes: %d, corrupted", len(got))
						}
					}
				}
				if err != nil {
					errMu.Lock()
					errs = append(errs, fmt.Errorf("client %d/%d: %w", i, r, err))
					errMu.Unlock()
					return nil
				}
				runtime.GC()
			}
			return nil
		})
	}
	g.Wait()
	for _, err := range errs {
		t.Error(err)
	}
	tr.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		t.Errorf("Shutdown: %v", err)
	}
	if err := <-served; err != http.ErrServerClosed {
		t.Errorf("Serve: %v", err)
	}
}

// selfSigned returns a certificate for 127.0.0.1 and a pool that trusts it.
func selfSigned(t *testing.T) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "weft test"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: cert}, pool
}

// TestAppsTLS runs TLS over vnet with both ends in virtual threads, so
// that the handshakes park deep inside crypto/tls on both sides; then a
// line protocol over the TLS connections, with collections forced while
// they are parked, and TLS 1.2 and 1.3 both.
func TestAppsTLS(t *testing.T) {
	cert, pool := selfSigned(t)
	// crypto/tls's Conn.handshakeContext has deferred calls with runtime
	// records, which move with its frame: a handshake parks without
	// holding its carrier. Ten handshakes at once (five clients, five
	// servers) on one carrier need no compensation carrier, and nothing
	// pins.
	appsCarriers(t, scheduler.Options{MaxCompensation: 1}, func(t *testing.T, s *scheduler.Scheduler) {
		for _, ver := range []uint16{tls.VersionTLS12, tls.VersionTLS13} {
			srvCfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: ver, MaxVersion: ver}
			cliCfg := &tls.Config{RootCAs: pool, ServerName: "127.0.0.1", MinVersion: ver, MaxVersion: ver}
			ln, err := vnet.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			stop := acceptLoop(t, s, ln, func(c net.Conn) error {
				tc := tls.Server(c, srvCfg)
				defer tc.Close()
				// A deadline over the handshake: a stalled peer ends
				// the test rather than hangs it.
				c.SetDeadline(time.Now().Add(10 * time.Second))
				if err := tc.Handshake(); err != nil {
					return fmt.Errorf("server handshake: %w", err)
				}
				c.SetDeadline(time.Time{})
				br := bufio.NewReader(tc)
				for {
					line, err := br.ReadString('\n')
					if err == io.EOF {
						return nil
					}
					if err != nil {
						return fmt.Errorf("server read: %w", err)
					}
					runtime.GC()
					if _, err := io.WriteString(tc, strings.ToUpper(line)); err != nil {
						return fmt.Errorf("server write: %w", err)
					}
				}
			})
			var g scheduler.WaitGroup
			var errMu sync.Mutex
			var errs []error
			for i := range 5 {
				g.Go(s, func(context.Context) error {
					err := func() error {
						c, err := vnet.Dial("tcp", ln.Addr().String())
						if err != nil {
							return err
						}
						tc := tls.Client(c, cliCfg)
						defer tc.Close()
						if err := tc.HandshakeContext(context.Background()); err != nil {
							return fmt.Errorf("client handshake: %w", err)
						}
						if v := tc.ConnectionState().Version; v != ver {
							return fmt.Errorf("version %x, want %x", v, ver)
						}
						br := bufio.NewReader(tc)
						// Lines of up to 40 KB: several records each.
						for k := range 20 {
							line := strings.Repeat(fmt.Sprintf("c%dl%d-", i, k), 1+k*k*60) + "\n"
							if _, err := io.WriteString(tc, line); err != nil {
								return err
							}
							got, err := br.ReadString('\n')
							if err != nil {
								return err
							}
							if got != strings.ToUpper(line) {
								return fmt.Errorf("line %d: got %d bytes, want %d", k, len(got), len(line))
							}
						}
						return tc.CloseWrite()
					}()
					if err != nil {
						errMu.Lock()
						errs = append(errs, fmt.Errorf("client %d: %w", i, err))
						errMu.Unlock()
					}
					return nil
				})
			}
			g.Wait()
			for _, err := range errs {
				t.Error(err)
			}
			for _, err := range stop() {
				t.Errorf("server: %v", err)
			}
		}
		// Neither the handshakes nor reading and writing records pin.
		for _, p := range s.Pins() {
			t.Errorf("pinned: %+v", p)
		}
	})
}

type record struct {
	ID    int               `json:"id"`
	Name  string            `json:"name"`
	Tags  []string          `json:"tags"`
	Attrs map[string]string `json:"attrs"`
	Blob  []byte            `json:"blob"`
	Next  *record           `json:"next,omitempty"`
}

func makeRecord(i int) record {
	r := record{
		ID:    i,
		Name:  strings.Repeat("n", i%50),
		Tags:  []string{"a", strconv.Itoa(i)},
		Attrs: map[string]string{"k": strconv.Itoa(i * 7)},
		Blob:  pattern(i%3000, uint64(i)),
	}
	if i%4 == 0 {
		r.Next = &record{ID: -i, Name: "child"}
	}
	return r
}

// TestAppsJSONGzipStream streams JSON records through gzip over vnet
// between virtual threads: an encoder that flushes the gzip stream every
// few records, so the decoder parks mid-value inside encoding/json and
// compress/flate, with collections forced on both sides.
func TestAppsJSONGzipStream(t *testing.T) {
	appsCarriers(t, scheduler.Options{}, func(t *testing.T, s *scheduler.Scheduler) {
		n := 2000
		if testing.Short() {
			n = 300
		}
		for round := range 3 {
			client, server := pair(t)
			wvt := goVT(t, s, func() error {
				defer client.Close()
				zw := gzip.NewWriter(client)
				enc := json.NewEncoder(zw)
				for i := range n {
					if err := enc.Encode(makeRecord(i)); err != nil {
						return err
					}
					if i%(7+round) == 0 {
						if err := zw.Flush(); err != nil {
							return err
						}
					}
					if i%97 == 0 {
						runtime.GC()
					}
				}
				return zw.Close()
			})
			rvt := goVT(t, s, func() error {
				defer server.Close()
				zr, err := gzip.NewReader(bufio.NewReaderSize(server, 512))
				if err != nil {
					return err
				}
				dec := json.NewDecoder(zr)
				for i := 0; ; i++ {
					var r record
					err := dec.Decode(&r)
					if err == io.EOF {
						if i != n {
							return fmt.Errorf("%d records, want %d", i, n)
						}
						return nil
					}
					if err != nil {
						return fmt.Errorf("record %d: %w", i, err)
					}
					want := makeRecord(i)
					if r.ID != want.ID || r.Name != want.Name || !bytes.Equal(r.Blob, want.Blob) || r.Attrs["k"] != want.Attrs["k"] || (r.Next == nil) != (want.Next == nil) {
						return fmt.Errorf("record %d corrupted: %+v", i, r)
					}
					if i%101 == 0 {
						runtime.GC()
					}
				}
			})
			if err := wvt.Join(); err != nil {
				t.Errorf("writer: %v", err)
			}
			if err := rvt.Join(); err != nil {
				t.Errorf("reader: %v", err)
			}
		}
		noPins(t, s)
	})
}
