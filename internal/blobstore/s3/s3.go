// Package s3 is the s3:// backup store: objects in one S3 (or S3-compatible)
// bucket under an optional prefix, through the AWS SDK. Linking the package
// registers the scheme with blobstore (internal/engines links it into the
// binaries); nothing else imports it.
package s3

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"sort"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	"github.com/sluicehq/sluice/internal/blobstore"
)

// defaultRegion is used when neither Options nor the AWS configuration chain
// names a region; S3-compatible servers generally accept it.
const defaultRegion = "us-east-1"

// s3Store keeps objects in one bucket under an optional key prefix.
type s3Store struct {
	client *s3.Client
	bucket string
	prefix string // "" or ending in "/"
}

func init() {
	blobstore.Register("s3", "s3://bucket[/prefix]", func(ctx context.Context, u *url.URL, opts blobstore.Options) (blobstore.Store, error) {
		return openS3(ctx, u, opts)
	})
}

// openS3 opens s3://bucket/prefix. Credentials come from the standard AWS
// chain (environment, shared files, SSO, web identity, instance roles).
func openS3(ctx context.Context, u *url.URL, opts blobstore.Options) (*s3Store, error) {
	if u.User != nil {
		return nil, fmt.Errorf("open store %s: credentials in the URL are not accepted; use the AWS credential chain (AWS_ACCESS_KEY_ID, AWS_PROFILE, ...)", blobstore.Redact(u))
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("open store %s: s3 URLs take no query or fragment", blobstore.Redact(u))
	}
	if u.Host == "" {
		return nil, fmt.Errorf("open store %s: missing bucket (write s3://bucket/prefix)", blobstore.Redact(u))
	}
	prefix := strings.Trim(u.Path, "/")
	if prefix != "" {
		if err := blobstore.ValidateKey(prefix); err != nil {
			return nil, fmt.Errorf("open store %s: bad prefix: %w", blobstore.Redact(u), err)
		}
		prefix += "/"
	}
	if err := opts.Check("s3", blobstore.OptEndpoint, blobstore.OptRegion, blobstore.OptPathStyle); err != nil {
		return nil, fmt.Errorf("open store %s: %w", blobstore.Redact(u), err)
	}
	endpoint, region := opts[blobstore.OptEndpoint], opts[blobstore.OptRegion]
	pathStyle := false
	if v, ok := opts[blobstore.OptPathStyle]; ok {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return nil, fmt.Errorf("open store %s: option %s=%q is not true or false", blobstore.Redact(u), blobstore.OptPathStyle, v)
		}
		pathStyle = b
	}
	if endpoint != "" {
		eu, err := url.Parse(endpoint)
		if err != nil || (eu.Scheme != "http" && eu.Scheme != "https") || eu.Host == "" {
			return nil, fmt.Errorf("open store %s: endpoint must be an http:// or https:// URL", blobstore.Redact(u))
		}
	}

	load := []func(*config.LoadOptions) error{
		config.WithRetryer(newRetryer),
		config.WithHTTPClient(newHTTPClient()),
		// Checksums only where S3 demands them: S3-compatible servers differ
		// in which flexible checksums they accept.
		config.WithRequestChecksumCalculation(aws.RequestChecksumCalculationWhenRequired),
		config.WithResponseChecksumValidation(aws.ResponseChecksumValidationWhenRequired),
	}
	if region != "" && region != "auto" {
		load = append(load, config.WithRegion(region))
	}
	cfg, err := config.LoadDefaultConfig(ctx, load...)
	if err != nil {
		return nil, fmt.Errorf("open store %s: load AWS configuration: %w", blobstore.Redact(u), err)
	}
	if cfg.Region == "" || cfg.Region == "auto" {
		cfg.Region = defaultRegion
	}
	client := s3.NewFromConfig(cfg, func(o *s3.Options) {
		if endpoint != "" {
			o.BaseEndpoint = aws.String(endpoint)
		}
		o.UsePathStyle = pathStyle
	})
	return &s3Store{client: client, bucket: u.Host, prefix: prefix}, nil
}

// String returns s3://bucket/prefix (s3://bucket without a prefix).
func (s *s3Store) String() string {
	if s.prefix == "" {
		return "s3://" + s.bucket
	}
	return "s3://" + s.bucket + "/" + strings.TrimSuffix(s.prefix, "/")
}

// name is the object's full URL, for error messages.
func (s *s3Store) name(key string) string {
	return "s3://" + s.bucket + "/" + s.prefix + key
}

// Put implements Store with PutObject, which S3 applies atomically.
func (s *s3Store) Put(ctx context.Context, key string, data []byte) error {
	if err := blobstore.ValidateKey(key); err != nil {
		return fmt.Errorf("s3 put: %w", err)
	}
	_, err := s.client.PutObject(ctx, &s3.PutObjectInput{
		Bucket:        aws.String(s.bucket),
		Key:           aws.String(s.prefix + key),
		Body:          bytes.NewReader(data),
		ContentLength: aws.Int64(int64(len(data))),
	})
	if err != nil {
		return s.fail(ctx, "put", key, err)
	}
	return nil
}

// PutIfAbsent implements Store with a conditional PutObject (If-None-Match:
// *). S3 answers 412 when the key exists and 409 when a concurrent
// conditional write to it is in flight; both mean another writer got there.
//
// If a first attempt landed but its answer was lost, the SDK's retry meets
// the object it wrote and this reports ErrExists: callers that must tell
// "mine" from "theirs" read the object back and compare.
func (s *s3Store) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	if err := blobstore.ValidateKey(key); err != nil {
		return fmt.Errorf("s3 put-if-absent: %w", err)
	}
	_, err := s.client.PutObject(ctx, &s3.PutObjectInput{
		Bucket:        aws.String(s.bucket),
		Key:           aws.String(s.prefix + key),
		Body:          bytes.NewReader(data),
		ContentLength: aws.Int64(int64(len(data))),
		IfNoneMatch:   aws.String("*"),
	})
	if err != nil {
		if isConditionFailed(err) {
			return fmt.Errorf("s3 put-if-absent %s: %w", s.name(key), blobstore.ErrExists)
		}
		return s.fail(ctx, "put-if-absent", key, err)
	}
	return nil
}

// Get implements Store. The body is checked against the announced
// Content-Length so a truncated transfer surfaces as ErrShortRead.
func (s *s3Store) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	if err := blobstore.ValidateKey(key); err != nil {
		return nil, fmt.Errorf("s3 get: %w", err)
	}
	out, err := s.client.GetObject(ctx, &s3.GetObjectInput{
		Bucket: aws.String(s.bucket),
		Key:    aws.String(s.prefix + key),
	})
	if err != nil {
		return nil, s.fail(ctx, "get", key, err)
	}
	return blobstore.CheckedBody(ctx, out.Body, out.ContentLength, s.name(key), isUnreachable), nil
}

// List implements Store with ListObjectsV2, page by page.
func (s *s3Store) List(ctx context.Context, prefix string) ([]blobstore.ObjectInfo, error) {
	if err := blobstore.ValidatePrefix(prefix); err != nil {
		return nil, fmt.Errorf("s3 list: %w", err)
	}
	in := &s3.ListObjectsV2Input{Bucket: aws.String(s.bucket)}
	if full := s.prefix + prefix; full != "" {
		in.Prefix = aws.String(full)
	}
	var out []blobstore.ObjectInfo
	pages := s3.NewListObjectsV2Paginator(s.client, in)
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, s.fail(ctx, "list", prefix, err)
		}
		for _, o := range page.Contents {
			key := strings.TrimPrefix(aws.ToString(o.Key), s.prefix)
			if key == "" || strings.HasSuffix(key, "/") {
				continue // directory marker, not an object
			}
			out = append(out, blobstore.ObjectInfo{Key: key, Size: aws.ToInt64(o.Size), Modified: aws.ToTime(o.LastModified)})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, nil
}

// Delete implements Store with DeleteObject.
func (s *s3Store) Delete(ctx context.Context, key string) error {
	if err := blobstore.ValidateKey(key); err != nil {
		return fmt.Errorf("s3 delete: %w", err)
	}
	_, err := s.client.DeleteObject(ctx, &s3.DeleteObjectInput{
		Bucket: aws.String(s.bucket),
		Key:    aws.String(s.prefix + key),
	})
	if err != nil && !isNotFound(err) {
		return s.fail(ctx, "delete", key, err)
	}
	return nil
}

// fail wraps an SDK error with the operation, the object and, where it
// applies, ErrNotFound or ErrUnreachable.
func (s *s3Store) fail(ctx context.Context, op, key string, err error) error {
	name := s.name(key)
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("s3 %s %s: %w", op, name, err)
	case isNotFound(err):
		return fmt.Errorf("s3 %s %s: %w: %w", op, name, blobstore.ErrNotFound, err)
	case isUnreachable(err):
		return fmt.Errorf("s3 %s %s: %w: %w", op, name, blobstore.ErrUnreachable, err)
	default:
		return fmt.Errorf("s3 %s %s: %w", op, name, err)
	}
}

// httpStatus returns the HTTP status of an SDK error, or 0 if the request got
// no answer.
func httpStatus(err error) int {
	var re interface{ HTTPStatusCode() int }
	if errors.As(err, &re) {
		return re.HTTPStatusCode()
	}
	return 0
}

// errorCode returns the S3 error code of an SDK error, or "".
func errorCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

// isNotFound reports a missing key (not a missing bucket, which is a
// configuration error).
func isNotFound(err error) bool {
	var nsk *types.NoSuchKey
	if errors.As(err, &nsk) {
		return true
	}
	switch errorCode(err) {
	case "NoSuchKey", "NotFound":
		return true
	case "NoSuchBucket":
		return false
	}
	return httpStatus(err) == 404
}

// isConditionFailed reports a failed If-None-Match or If-Match condition.
func isConditionFailed(err error) bool {
	switch errorCode(err) {
	case "PreconditionFailed", "ConditionalRequestConflict":
		return true
	}
	switch httpStatus(err) {
	case 412:
		return true
	case 409:
		return errorCode(err) == "" // a bare 409 answer to a conditional write
	}
	return false
}
