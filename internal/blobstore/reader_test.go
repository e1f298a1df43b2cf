package blobstore

import (
	"errors"
	"io"
	"strings"
	"testing"
)

func TestLengthReader(t *testing.T) {
	cases := []struct {
		body    string
		want    int64
		wantErr error
	}{
		{"", 0, nil},
		{"hello", 5, nil},
		{"hel", 5, ErrShortRead},
		{"", 1, ErrShortRead},
		{"hello!", 5, errTooLong},
	}
	for _, c := range cases {
		r := newLengthReader(io.NopCloser(strings.NewReader(c.body)), "obj", c.want)
		got, err := io.ReadAll(r)
		switch {
		case c.wantErr == nil && err != nil:
			t.Errorf("%q announced %d: %v", c.body, c.want, err)
		case c.wantErr == nil && string(got) != c.body:
			t.Errorf("%q announced %d: read %q", c.body, c.want, got)
		case c.wantErr == ErrShortRead && !errors.Is(err, ErrShortRead):
			t.Errorf("%q announced %d: err %v, want ErrShortRead", c.body, c.want, err)
		case c.wantErr == errTooLong && (err == nil || errors.Is(err, ErrShortRead)):
			t.Errorf("%q announced %d: err %v, want a length error", c.body, c.want, err)
		}
	}
}

// errTooLong marks the case where the body is longer than announced.
var errTooLong = errors.New("too long")

func TestLengthReaderUnexpectedEOF(t *testing.T) {
	// net/http reports a connection closed mid-body as io.ErrUnexpectedEOF.
	r := newLengthReader(io.NopCloser(io.MultiReader(strings.NewReader("ab"), errReader{io.ErrUnexpectedEOF})), "obj", 10)
	if _, err := io.ReadAll(r); !errors.Is(err, ErrShortRead) {
		t.Fatalf("err = %v, want ErrShortRead", err)
	}
}

func TestLengthReaderUnknownLength(t *testing.T) {
	rc := io.NopCloser(strings.NewReader("abc"))
	if r := newLengthReader(rc, "obj", -1); r != rc {
		t.Fatal("unknown length should leave the reader alone")
	}
}

type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }
