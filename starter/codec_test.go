package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/sluicehq/sluice/internal/errcode"
	"github.com/sluicehq/sluice/internal/payloadcodec"
)

func TestCodecServerDecode(t *testing.T) {
	codec, err := payloadcodec.New(bytes.Repeat([]byte{3}, 32))
	if err != nil {
		t.Fatal(err)
	}
	plain, _ := converter.GetDefaultDataConverter().ToPayload("postgres://app@db/prod")
	enc, _ := codec.Encode([]*commonpb.Payload{plain})
	body, _ := protojson.Marshal(&commonpb.Payloads{Payloads: enc})

	const ui = "http://127.0.0.1:8233"
	srv := httptest.NewServer(codecHandler(converter.NewPayloadCodecHTTPHandler(codec), []string{ui}))
	defer srv.Close()

	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/decode", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Origin", ui)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Access-Control-Allow-Origin") != ui {
		t.Fatalf("status %d, CORS %q: %s", resp.StatusCode, resp.Header.Get("Access-Control-Allow-Origin"), out)
	}
	var got commonpb.Payloads
	if err := protojson.Unmarshal(out, &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	var s string
	if len(got.Payloads) != 1 || converter.GetDefaultDataConverter().FromPayload(got.Payloads[0], &s) != nil || s != "postgres://app@db/prod" {
		t.Errorf("decoded %v", got.Payloads)
	}

	// Preflight from the UI is answered; another origin gets no CORS grant.
	pre, _ := http.NewRequest(http.MethodOptions, srv.URL+"/decode", nil)
	pre.Header.Set("Origin", "http://evil.example")
	resp, err = http.DefaultClient.Do(pre)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("an unlisted origin was granted CORS")
	}

	// A payload encrypted with another key is refused with the key IDs.
	other, _ := payloadcodec.New(bytes.Repeat([]byte{4}, 32))
	enc2, _ := other.Encode([]*commonpb.Payload{plain})
	body2, _ := protojson.Marshal(&commonpb.Payloads{Payloads: enc2})
	resp, err = http.Post(srv.URL+"/decode", "application/json", bytes.NewReader(body2))
	if err != nil {
		t.Fatal(err)
	}
	out, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(out), other.KeyID()) {
		t.Errorf("wrong key: status %d, body %s", resp.StatusCode, out)
	}
}

func TestCodecServerListenChecks(t *testing.T) {
	for _, ok := range []string{"127.0.0.1:8234", "[::1]:8234", "localhost:8234"} {
		if err := checkCodecListen(ok, false); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	for _, bad := range []string{"0.0.0.0:8234", ":8234", "10.0.0.5:8234"} {
		if err := checkCodecListen(bad, false); !errcode.Is(err, errcode.CodecServerRemote) {
			t.Errorf("%s: err = %v, want %s", bad, err, errcode.CodecServerRemote)
		}
		if err := checkCodecListen(bad, true); err != nil {
			t.Errorf("%s with --allow-remote: %v", bad, err)
		}
	}
}

func TestCodecServerCommandRefusals(t *testing.T) {
	t.Setenv("SLUICE_TEST_PK", base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{1}, 32)))
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"codec-server"}, "SLUICE-E-USAGE"},
		{[]string{"codec-server", "--payload-key-env", "SLUICE_TEST_UNSET_PK"}, "SLUICE-E-PAYLOAD-KEY-INVALID"},
		{[]string{"codec-server", "--payload-key-env", "SLUICE_TEST_PK", "--listen", "0.0.0.0:0"}, "SLUICE-E-CODEC-SERVER-REMOTE"},
	} {
		var stdout, stderr bytes.Buffer
		code := newCLI(&stdout, &stderr).run(context.Background(), tc.args)
		if code != errcode.ExitUsage || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %s", tc.args, code, stderr.String(), tc.want)
		}
	}
}
