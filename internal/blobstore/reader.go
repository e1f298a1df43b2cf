package blobstore

import (
	"context"
	"errors"
	"fmt"
	"io"
)

// lengthReader passes an object's bytes through and checks that exactly the
// announced number arrive: an early end becomes ErrShortRead, never io.EOF.
type lengthReader struct {
	rc   io.ReadCloser
	name string
	want int64
	got  int64
	// wrapErr, when set, adds context to errors other than EOF (the remote
	// stores mark network failures as ErrUnreachable).
	wrapErr func(error) error
}

// newLengthReader wraps rc, which should yield exactly want bytes. A negative
// want means the length is unknown and rc is returned unchanged.
func newLengthReader(rc io.ReadCloser, name string, want int64) io.ReadCloser {
	return CheckLength(rc, name, want, nil)
}

// CheckLength wraps rc, the body of the object name, which should yield
// exactly want bytes: an early end becomes ErrShortRead, never io.EOF. A
// negative want means the length is unknown and rc is returned unchanged.
// wrapErr, when not nil, adds context to read errors other than the body's
// end (a store marks failures of the network ErrUnreachable).
func CheckLength(rc io.ReadCloser, name string, want int64, wrapErr func(error) error) io.ReadCloser {
	if want < 0 {
		return rc
	}
	return &lengthReader{rc: rc, name: name, want: want, wrapErr: wrapErr}
}

// Read implements io.Reader.
func (r *lengthReader) Read(p []byte) (int, error) {
	n, err := r.rc.Read(p)
	r.got += int64(n)
	if r.got > r.want {
		return n, fmt.Errorf("read %s: %d bytes where %d were announced", r.name, r.got, r.want)
	}
	switch {
	case err == nil:
		return n, nil
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		if r.got < r.want {
			return n, fmt.Errorf("read %s: got %d of %d bytes: %w", r.name, r.got, r.want, ErrShortRead)
		}
		return n, io.EOF
	default:
		if r.wrapErr != nil {
			err = r.wrapErr(err)
		}
		return n, fmt.Errorf("read %s after %d of %d bytes: %w", r.name, r.got, r.want, err)
	}
}

// Close implements io.Closer.
func (r *lengthReader) Close() error { return r.rc.Close() }

// CheckedBody wraps a store's response body of announced length (nil or
// negative: unknown, the body is returned as it is) as CheckLength does,
// with the read failures of the network or the server, as unreachable
// says, ErrUnreachable while ctx is live.
func CheckedBody(ctx context.Context, body io.ReadCloser, length *int64, name string, unreachable func(error) bool) io.ReadCloser {
	if length == nil || *length < 0 {
		return body
	}
	return CheckLength(body, name, *length, func(err error) error {
		if ctx.Err() == nil && unreachable(err) {
			return fmt.Errorf("%w: %w", ErrUnreachable, err)
		}
		return err
	})
}
