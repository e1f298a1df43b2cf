package payloadcodec

import (
	"bytes"
	"encoding/base64"
	"strings"
	"testing"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/proto"

	"github.com/sluicehq/sluice/internal/errcode"
)

func key(b byte) []byte { return bytes.Repeat([]byte{b}, KeySize) }

func mustCodec(t *testing.T, k []byte) *Codec {
	t.Helper()
	c, err := New(k)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func jsonPayload(t *testing.T, v any) *commonpb.Payload {
	t.Helper()
	p, err := converter.GetDefaultDataConverter().ToPayload(v)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestRoundTrip(t *testing.T) {
	c := mustCodec(t, key(1))
	in := []*commonpb.Payload{jsonPayload(t, map[string]string{"dsn": "postgres://app@db/prod"}), jsonPayload(t, nil)}
	enc, err := c.Encode(in)
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range enc {
		if got := string(p.Metadata[converter.MetadataEncoding]); got != Encoding {
			t.Errorf("payload %d: encoding %q", i, got)
		}
		if got := string(p.Metadata[MetadataKeyID]); got != c.KeyID() {
			t.Errorf("payload %d: key ID %q, want %q", i, got, c.KeyID())
		}
		if bytes.Contains(p.Data, []byte("postgres://")) {
			t.Errorf("payload %d is readable: %q", i, p.Data)
		}
	}
	again, _ := c.Encode(in[:1])
	if bytes.Equal(again[0].Data, enc[0].Data) {
		t.Error("two encryptions of one payload are identical: the nonce is not random")
	}
	dec, err := c.Decode(enc)
	if err != nil {
		t.Fatal(err)
	}
	for i := range in {
		if !proto.Equal(dec[i], in[i]) {
			t.Errorf("payload %d: decoded %v, want %v", i, dec[i], in[i])
		}
	}
	var got map[string]string
	if err := converter.GetDefaultDataConverter().FromPayload(dec[0], &got); err != nil || got["dsn"] != "postgres://app@db/prod" {
		t.Errorf("decoded value %v, %v", got, err)
	}
}

func TestTamperedPayloadIsRefused(t *testing.T) {
	c := mustCodec(t, key(1))
	enc, _ := c.Encode([]*commonpb.Payload{jsonPayload(t, "secret")})
	for name, mutate := range map[string]func(p *commonpb.Payload){
		"flipped bit": func(p *commonpb.Payload) { p.Data[len(p.Data)-1] ^= 1 },
		"truncated":   func(p *commonpb.Payload) { p.Data = p.Data[:5] },
	} {
		p := proto.Clone(enc[0]).(*commonpb.Payload)
		mutate(p)
		_, err := c.Decode([]*commonpb.Payload{p})
		if !errcode.Is(err, errcode.PayloadUndecryptable) || !strings.Contains(err.Error(), c.KeyID()) {
			t.Errorf("%s: err = %v, want %s naming key ID %s", name, err, errcode.PayloadUndecryptable, c.KeyID())
		}
	}
}

func TestWrongKeyNamesKeyIDs(t *testing.T) {
	writer, reader := mustCodec(t, key(1)), mustCodec(t, key(2))
	if writer.KeyID() == reader.KeyID() {
		t.Fatal("two keys share a key ID")
	}
	enc, _ := writer.Encode([]*commonpb.Payload{jsonPayload(t, "secret")})
	_, err := reader.Decode(enc)
	if !errcode.Is(err, errcode.PayloadUndecryptable) {
		t.Fatalf("err = %v, want %s", err, errcode.PayloadUndecryptable)
	}
	for _, id := range []string{writer.KeyID(), reader.KeyID()} {
		if !strings.Contains(err.Error(), id) {
			t.Errorf("error %q does not name key ID %s", err, id)
		}
	}
	// A key ID rewritten to the reader's does not get past authentication.
	enc[0].Metadata[MetadataKeyID] = []byte(reader.KeyID())
	if _, err := reader.Decode(enc); !errcode.Is(err, errcode.PayloadUndecryptable) {
		t.Errorf("rewritten key ID: err = %v", err)
	}
}

func TestUnencryptedPayloadsPassThrough(t *testing.T) {
	c := mustCodec(t, key(1))
	in := []*commonpb.Payload{jsonPayload(t, "written before encryption"), jsonPayload(t, []byte{1, 2}), {}}
	out, err := c.Decode(in)
	if err != nil {
		t.Fatal(err)
	}
	for i := range in {
		if out[i] != in[i] {
			t.Errorf("payload %d was changed", i)
		}
	}
}

func TestFromEnv(t *testing.T) {
	k := key(7)
	env := map[string]string{
		"GOOD":  base64.StdEncoding.EncodeToString(k),
		"SHORT": base64.StdEncoding.EncodeToString(k[:16]),
		"JUNK":  "not base64 !!",
	}
	getenv := func(n string) string { return env[n] }
	c, err := FromEnv("GOOD", "--payload-key-env", getenv)
	if err != nil || c.KeyID() != KeyID(k) {
		t.Fatalf("GOOD: %v, %v", c, err)
	}
	for _, name := range []string{"UNSET", "SHORT", "JUNK"} {
		_, err := FromEnv(name, "--payload-key-env", getenv)
		if !errcode.Is(err, errcode.PayloadKeyInvalid) || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: err = %v, want %s naming the variable", name, err, errcode.PayloadKeyInvalid)
		}
		if err != nil && env[name] != "" && strings.Contains(err.Error(), env[name]) {
			t.Errorf("%s: error quotes the value: %v", name, err)
		}
	}
}
