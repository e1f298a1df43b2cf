package activities

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/sluicehq/sluice/internal/blobstore"
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
