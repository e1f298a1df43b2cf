package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/go-sql-driver/mysql"

	"github.com/sluicehq/sluice/internal/errcode"
)

// infileSeq numbers the readers LOAD DATA LOCAL INFILE streams from.
var infileSeq atomic.Int64

// infileChunk is how much row text is buffered before it is handed to
// the server.
const infileChunk = 256 << 10

// infileLoader streams rows to the server with LOAD DATA LOCAL INFILE, in
// its tab-separated text form (\N for NULL, backslash escapes), while the
// statement runs in a goroutine of its own on the load's connection. With
// LOCAL the server turns a value a column will not take into a warning
// rather than an error (it cannot stop the client's stream), so the loader
// reads the warnings after the statement and refuses the load when there
// is any; the values themselves were checked by render before.
type infileLoader struct {
	conn  *sql.Conn
	table string // the recorded name, for messages
	cols  []column
	w     *io.PipeWriter
	buf   []byte
	done  chan error
	name  string
	ended bool
}

// newInfileLoader starts LOAD DATA LOCAL INFILE into the table name.
func newInfileLoader(ctx context.Context, conn *sql.Conn, table, name string, cols []column) *infileLoader {
	r, w := io.Pipe()
	l := &infileLoader{conn: conn, table: table, cols: cols, w: w, done: make(chan error, 1),
		name: fmt.Sprintf("sluice-load-%d", infileSeq.Add(1)), buf: make([]byte, 0, infileChunk+4096)}
	mysql.RegisterReaderHandler(l.name, func() io.Reader { return r })
	names := make([]string, len(cols))
	for i, c := range cols {
		names[i] = c.quoted
	}
	stmt := "LOAD DATA LOCAL INFILE 'Reader::" + l.name + "' INTO TABLE " + quoteIdent(name) +
		` CHARACTER SET utf8mb4 FIELDS TERMINATED BY '\t' ESCAPED BY '\\' LINES TERMINATED BY '\n' (` + strings.Join(names, ", ") + ")"
	go func() {
		_, err := conn.ExecContext(ctx, stmt)
		r.CloseWithError(err) // a writer blocked on a failed load returns
		l.done <- err
	}()
	return l
}

// Add renders one tuple as a line of the stream.
func (l *infileLoader) Add(_ context.Context, values [][]byte) error {
	for i := range l.cols {
		c := &l.cols[i]
		if i > 0 {
			l.buf = append(l.buf, '\t')
		}
		arg, err := c.FromChunk(values[i])
		if err != nil {
			return refuseValue(l.table, c, err)
		}
		l.buf = appendField(l.buf, arg)
	}
	l.buf = append(l.buf, '\n')
	if len(l.buf) >= infileChunk {
		return l.send()
	}
	return nil
}

// send hands the buffered lines to the server.
func (l *infileLoader) send() error {
	if _, err := l.w.Write(l.buf); err != nil {
		return l.finish(err)
	}
	l.buf = l.buf[:0]
	return nil
}

// Flush ends the stream, waits for the statement and refuses the load
// when the server warned of any value.
func (l *infileLoader) Flush(ctx context.Context) error {
	if len(l.buf) > 0 {
		if err := l.send(); err != nil {
			return err
		}
	}
	return l.finish(nil)
}

// finish closes the stream (with cause, when the writing failed) and
// returns the load's outcome.
func (l *infileLoader) finish(cause error) error {
	if l.ended {
		return cause
	}
	l.ended = true
	l.w.CloseWithError(cause)
	err := <-l.done
	mysql.DeregisterReaderHandler(l.name)
	if err != nil {
		return classify(err, "load into "+l.table)
	}
	if cause != nil {
		return cause
	}
	return l.warnings()
}

// warnings refuses the load when the server reported any warning for it.
func (l *infileLoader) warnings() error {
	rows, err := l.conn.QueryContext(context.Background(), "SHOW WARNINGS LIMIT 3")
	if err != nil {
		return classify(err, "read the warnings of the load into "+l.table)
	}
	defer rows.Close()
	var msgs []string
	for rows.Next() {
		var level, msg string
		var code int
		if err := rows.Scan(&level, &code, &msg); err != nil {
			return classify(err, "read the warnings of the load into "+l.table)
		}
		msgs = append(msgs, fmt.Sprintf("%s %d: %s", level, code, msg))
	}
	if err := rows.Err(); err != nil {
		return classify(err, "read the warnings of the load into "+l.table)
	}
	if len(msgs) > 0 {
		return &errcode.Error{Code: errcode.TargetValueRefused,
			Message: "table " + l.table + ": the server did not take every value as it is: " + strings.Join(msgs, "; "), Hint: valueHint}
	}
	return nil
}

// Close ends a stream the load gave up on.
func (l *infileLoader) Close() {
	if !l.ended {
		_ = l.finish(io.ErrClosedPipe)
	}
}

// appendField appends one rendered value in LOAD DATA's text form.
func appendField(b []byte, arg any) []byte {
	switch v := arg.(type) {
	case nil:
		return append(b, '\\', 'N')
	case int64:
		return strconv.AppendInt(b, v, 10)
	case uint64:
		return strconv.AppendUint(b, v, 10)
	case float64:
		if math.IsInf(v, 0) || math.IsNaN(v) {
			return append(b, '\\', 'N') // render refuses these before
		}
		return strconv.AppendFloat(b, v, 'g', -1, 64)
	case string:
		return appendEscaped(b, v)
	case []byte:
		return appendEscaped(b, string(v))
	}
	return appendEscaped(b, fmt.Sprint(arg))
}

// appendEscaped appends s with the bytes LOAD DATA treats specially
// escaped by a backslash.
func appendEscaped(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '\\':
			b = append(b, '\\', '\\')
		case '\t':
			b = append(b, '\\', 't')
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		case 0:
			b = append(b, '\\', '0')
		default:
			b = append(b, c)
		}
	}
	return b
}
