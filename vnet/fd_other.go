//go:build !linux

package vnet

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"time"
)

// errUnsupported is what Listen and Dial return where vnet has no poller.
var errUnsupported = fmt.Errorf("vnet: not supported on %s: %w", runtime.GOOS, errors.ErrUnsupported)

func supported() error { return errUnsupported }

// netFD is never created on this platform: Listen and Dial fail first.
type netFD struct{}

func sysListen(network string, laddr *net.TCPAddr) (*netFD, *net.TCPAddr, error) {
	return nil, nil, errUnsupported
}

func sysDial(ctx context.Context, network string, raddr *net.TCPAddr) (*netFD, *net.TCPAddr, *net.TCPAddr, error) {
	return nil, nil, nil, errUnsupported
}

func (*netFD) accept() (*netFD, *net.TCPAddr, *net.TCPAddr, error) {
	return nil, nil, nil, errUnsupported
}
func (*netFD) read(p []byte) (int, error)                      { return 0, errUnsupported }
func (*netFD) write(p []byte) (int, error)                     { return 0, errUnsupported }
func (*netFD) close() error                                    { return errUnsupported }
func (*netFD) shutdown(how int) error                          { return errUnsupported }
func (*netFD) setDeadline(t time.Time, read, write bool) error { return errUnsupported }

func (*netFD) control(f func(fd uintptr)) error       { return errUnsupported }
func (*netFD) rawRead(f func(fd uintptr) bool) error  { return errUnsupported }
func (*netFD) rawWrite(f func(fd uintptr) bool) error { return errUnsupported }
func (*netFD) setNoDelay(on bool) error               { return errUnsupported }
func (*netFD) setKeepAlive(on bool) error             { return errUnsupported }
func (*netFD) setKeepAliveIdle(d time.Duration) error { return errUnsupported }
func (*netFD) setLinger(sec int) error                { return errUnsupported }
func (*netFD) setReadBuffer(bytes int) error          { return errUnsupported }
func (*netFD) setWriteBuffer(bytes int) error         { return errUnsupported }
func (*Conn) readFrom(io.Reader) (int64, bool, error) { return 0, false, nil }
