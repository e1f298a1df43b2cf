package activities

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/sluicehq/sluice/internal/blobstore"
	"github.com/sluicehq/sluice/internal/keyref"
)

// A store reference recorded before store options existed (its S3 settings
// were fields of their own) still decodes, into the options.
func TestStoreRefReadsRecordedShapes(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     StoreRef
	}{
		{"file store", `{"url":"file:///tmp/c"}`, StoreRef{URL: "file:///tmp/c"}},
		{"recorded S3 fields", `{"url":"s3://b/p","endpoint":"http://127.0.0.1:7070","path_style":true}`,
			StoreRef{URL: "s3://b/p", Options: blobstore.Options{blobstore.OptEndpoint: "http://127.0.0.1:7070", blobstore.OptPathStyle: "true"}}},
		{"options", `{"url":"s3://b","options":{"region":"eu-west-1"}}`,
			StoreRef{URL: "s3://b", Options: blobstore.Options{blobstore.OptRegion: "eu-west-1"}}},
		{"key references", `{"url":"s3://b","trust":{"passphrase_env":"SLUICE_PASS","encrypt":true,"verify_key_file":"/k.pub","require_signature":true}}`,
			StoreRef{URL: "s3://b", Trust: keyref.Ref{PassphraseEnv: "SLUICE_PASS", Encrypt: true, VerifyKeyFile: "/k.pub", RequireSignature: true}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got StoreRef
			if err := json.Unmarshal([]byte(tc.in), &got); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("decoded %+v, want %+v", got, tc.want)
			}
			b, err := json.Marshal(got)
			if err != nil {
				t.Fatal(err)
			}
			var again StoreRef
			if err := json.Unmarshal(b, &again); err != nil || !reflect.DeepEqual(again, tc.want) {
				t.Fatalf("round trip through %s gave %+v, %v", b, again, err)
			}
		})
	}
}

// A store without keys records no trust field: runs recorded before keys
// existed and runs without them have the same input.
func TestStoreRefWithoutKeysRecordsNoTrust(t *testing.T) {
	b, err := json.Marshal(StoreRef{URL: "file:///tmp/c"})
	if err != nil || string(b) != `{"url":"file:///tmp/c"}` {
		t.Fatalf("encoded %s, %v", b, err)
	}
}
