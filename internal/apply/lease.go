package apply

import (
	"context"
	"errors"
	"time"

	"github.com/sluicehq/sluice/internal/errcode"
	"github.com/sluicehq/sluice/internal/target"
)

// Lease returns the check a lane makes of the stream's row, read under
// lock, before its transaction may commit: the row must exist, decode, and
// name owner as the run holding the stream. A run whose lease was taken
// over is a zombie, and its transaction must not commit.
func Lease(stream, owner string) func(target.StateRow) error {
	return func(row target.StateRow) error {
		if row.Token == "" {
			return errcode.New(errcode.BrokerFenced, "stream %s lost its position row while applying", stream)
		}
		t, err := Decode(row.Token, row.Checksum)
		if err != nil {
			return errcode.Wrap(errcode.BrokerPositionCorrupt, err, "stream %s", stream)
		}
		if t.Owner != owner {
			return errcode.New(errcode.BrokerFenced, "stream %s is now applied by run %s; this run (%s) stops", stream, t.Owner, owner)
		}
		return nil
	}
}

// Row encodes a token as the row a target stores, stamping when it moved.
func Row(t Token) (target.StateRow, error) {
	t.UpdatedAt = time.Now()
	text, sum, err := t.Encode()
	if err != nil {
		return target.StateRow{}, err
	}
	return target.StateRow{Token: text, Checksum: sum}, nil
}

// Claim gives the stream's lease to owner: from its commit on, every apply
// transaction of any other run fails its lease check and rolls back.
func Claim(ctx context.Context, st target.StateStore, stream, owner string) error {
	err := st.UpdateState(ctx, stream, func(row target.StateRow) (target.StateRow, error) {
		t, err := Decode(row.Token, row.Checksum)
		if err != nil {
			return row, errcode.Wrap(errcode.BrokerPositionCorrupt, err, "stream %s", stream)
		}
		t.Owner = owner
		return Row(t)
	})
	if errors.Is(err, target.ErrNoState) {
		return errcode.New(errcode.BrokerNoPosition, "the target holds no position for stream %q", stream)
	}
	return err
}

// ReadOwnedToken reads the stream's position and checks that owner holds it.
func ReadOwnedToken(ctx context.Context, st target.StateStore, stream, owner string) (Token, error) {
	row, ok, err := st.ReadState(ctx, stream)
	if err != nil {
		return Token{}, err
	}
	if !ok {
		return Token{}, errcode.New(errcode.BrokerFenced, "stream %s has no position row", stream)
	}
	tok, err := Decode(row.Token, row.Checksum)
	if err != nil {
		return Token{}, errcode.Wrap(errcode.BrokerPositionCorrupt, err, "stream %s", stream)
	}
	if tok.Owner != owner {
		return Token{}, errcode.New(errcode.BrokerFenced, "stream %s is now applied by run %s; this run (%s) stops", stream, tok.Owner, owner)
	}
	return tok, nil
}

// ReadMarks loads every mark of a stream.
func ReadMarks(ctx context.Context, st target.StateStore, stream string) (Marks, error) {
	m := Marks{}
	err := st.ReadMarks(ctx, stream, func(id Identity, first, last uint32) {
		for o := first; o <= last; o++ {
			m.Add(id, o)
			if o == last { // last may be the largest uint32
				break
			}
		}
	})
	return m, err
}
