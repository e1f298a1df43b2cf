// Package azblob is the azblob:// backup store: block blobs in one Azure
// Blob Storage container under an optional prefix, through the Azure SDK.
// Linking the package registers the scheme with blobstore (internal/engines
// links it into the binaries); nothing else imports it.
package azblob

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"sort"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"

	"github.com/sluicehq/sluice/internal/blobstore"
)

// Options of the azblob store. None carries a secret: credentials are named
// by the worker environment variable that holds them.
const (
	// OptAccount is the storage account name.
	OptAccount = "account"
	// OptConnectionStringEnv names an environment variable holding an
	// Azure Storage connection string (it gives account, endpoint and key).
	OptConnectionStringEnv = "connection_string_env"
	// OptAccountKeyEnv names an environment variable holding the
	// account's shared key.
	OptAccountKeyEnv = "account_key_env"
)

// Retry policy for Azure requests, the stores' common one: the SDK retries
// connection errors, timeouts, 408, 429 and 5xx answers with exponential
// backoff. Package variables so tests can shorten them.
var (
	azMaxRetries    int32 = blobstore.RetryAttempts - 1 // retries after the first attempt
	azRetryDelay          = blobstore.RetryBaseBackoff
	azMaxRetryDelay       = blobstore.RetryMaxBackoff
)

// azContainerName is Azure's rule for container names.
var azContainerName = regexp.MustCompile(`^[a-z0-9](?:[a-z0-9]|-[a-z0-9])*$`)

// azStore keeps objects as block blobs in one container under an optional
// name prefix.
type azStore struct {
	client    *azblob.Client
	container string
	prefix    string // "" or ending in "/"
}

func init() {
	blobstore.Register("azblob", "azblob://container[/prefix]", func(_ context.Context, u *url.URL, opts blobstore.Options) (blobstore.Store, error) {
		st, err := openAzure(u, opts)
		if err != nil {
			return nil, err // not a typed nil inside the interface
		}
		return st, nil
	})
}

// openAzure opens azblob://container/prefix. The account comes from the
// account and endpoint options (or from a connection string), the
// credential from a connection string or an account key held in named
// environment variables, or else from azidentity's default chain
// (environment, workload identity, managed identity, Azure CLI, ...).
func openAzure(u *url.URL, opts blobstore.Options) (*azStore, error) {
	name := blobstore.Redact(u)
	if u.User != nil {
		return nil, fmt.Errorf("open store %s: credentials in the URL are not accepted; name the variable that holds them with option %s or %s", name, OptAccountKeyEnv, OptConnectionStringEnv)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("open store %s: azblob URLs take no query or fragment (a SAS token in the URL is not accepted)", name)
	}
	if u.Host == "" {
		return nil, fmt.Errorf("open store %s: missing container (write azblob://container/prefix)", name)
	}
	if len(u.Host) < 3 || len(u.Host) > 63 || !azContainerName.MatchString(u.Host) {
		return nil, fmt.Errorf("open store %s: %q is not an Azure container name (3-63 lowercase letters, digits and single hyphens)", name, u.Host)
	}
	prefix := strings.Trim(u.Path, "/")
	if prefix != "" {
		if err := blobstore.ValidateKey(prefix); err != nil {
			return nil, fmt.Errorf("open store %s: bad prefix: %w", name, err)
		}
		prefix += "/"
	}
	if err := opts.Check("azblob", OptAccount, blobstore.OptEndpoint, OptConnectionStringEnv, OptAccountKeyEnv); err != nil {
		return nil, fmt.Errorf("open store %s: %w", name, err)
	}
	client, err := newAzureClient(opts)
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", name, err)
	}
	return &azStore{client: client, container: u.Host, prefix: prefix}, nil
}

// newAzureClient builds the service client the options describe.
func newAzureClient(opts blobstore.Options) (*azblob.Client, error) {
	account, endpoint := opts[OptAccount], opts[blobstore.OptEndpoint]
	connEnv, keyEnv := opts[OptConnectionStringEnv], opts[OptAccountKeyEnv]
	copts := &azblob.ClientOptions{ClientOptions: azcore.ClientOptions{
		Retry: policy.RetryOptions{
			MaxRetries:    azMaxRetries,
			RetryDelay:    azRetryDelay,
			MaxRetryDelay: azMaxRetryDelay,
		},
		Transport: newAzureHTTPClient(),
	}}

	if connEnv != "" {
		if keyEnv != "" || account != "" || endpoint != "" {
			return nil, fmt.Errorf("option %s names the account, endpoint and key itself: give it without %s, %s or %s", OptConnectionStringEnv, OptAccount, blobstore.OptEndpoint, OptAccountKeyEnv)
		}
		cs, err := lookupEnv(OptConnectionStringEnv, connEnv)
		if err != nil {
			return nil, err
		}
		client, err := azblob.NewClientFromConnectionString(cs, copts)
		if err != nil {
			// The SDK's message may quote the string: keep it out.
			return nil, fmt.Errorf("the connection string in $%s is not usable", connEnv)
		}
		return client, nil
	}

	if endpoint == "" {
		if account == "" {
			return nil, fmt.Errorf("say which storage account: option %s (or %s, or %s)", OptAccount, blobstore.OptEndpoint, OptConnectionStringEnv)
		}
		endpoint = "https://" + account + ".blob.core.windows.net/"
	}
	eu, err := url.Parse(endpoint)
	if err != nil || (eu.Scheme != "http" && eu.Scheme != "https") || eu.Host == "" || eu.User != nil || eu.RawQuery != "" {
		return nil, fmt.Errorf("option %s must be an http:// or https:// service URL without credentials or query", blobstore.OptEndpoint)
	}
	if !strings.HasSuffix(endpoint, "/") {
		endpoint += "/"
	}
	if account == "" {
		account = accountFromEndpoint(eu)
	}

	if keyEnv != "" {
		key, err := lookupEnv(OptAccountKeyEnv, keyEnv)
		if err != nil {
			return nil, err
		}
		if account == "" {
			return nil, fmt.Errorf("option %s needs the account name: give option %s", OptAccountKeyEnv, OptAccount)
		}
		cred, err := azblob.NewSharedKeyCredential(account, key)
		if err != nil {
			return nil, fmt.Errorf("the account key in $%s is not usable (it should be base64)", keyEnv)
		}
		return azblob.NewClientWithSharedKeyCredential(endpoint, cred, copts)
	}

	cred, err := azidentity.NewDefaultAzureCredential(nil)
	if err != nil {
		return nil, fmt.Errorf("no Azure credential (set option %s or %s, or configure azidentity's default chain): %w", OptAccountKeyEnv, OptConnectionStringEnv, err)
	}
	return azblob.NewClient(endpoint, cred, copts)
}

// lookupEnv reads the worker environment variable an option names.
func lookupEnv(option, variable string) (string, error) {
	v, ok := os.LookupEnv(variable)
	if !ok || v == "" {
		return "", fmt.Errorf("option %s names the environment variable %s, which is not set in this process", option, variable)
	}
	return v, nil
}

// accountFromEndpoint guesses the account from a service URL: the first
// path element for emulator-style URLs (http://127.0.0.1:10000/account),
// else the first label of the host (https://account.blob.core.windows.net).
func accountFromEndpoint(u *url.URL) string {
	if first, _, _ := strings.Cut(strings.Trim(u.Path, "/"), "/"); first != "" {
		return first
	}
	host := u.Hostname()
	if net.ParseIP(host) != nil || host == "localhost" {
		return ""
	}
	label, _, _ := strings.Cut(host, ".")
	return label
}

// newAzureHTTPClient bounds how long a dead server can hold a request:
// dialing and waiting for response headers time out (and are then retried).
func newAzureHTTPClient() *http.Client {
	return &http.Client{Transport: blobstore.BoundedTransport(blobstore.HeaderTimeout)}
}

// String returns azblob://container/prefix (azblob://container without a
// prefix); the account and credentials are options, not part of it.
func (s *azStore) String() string {
	if s.prefix == "" {
		return "azblob://" + s.container
	}
	return "azblob://" + s.container + "/" + strings.TrimSuffix(s.prefix, "/")
}

// name is the object's full URL, for error messages.
func (s *azStore) name(key string) string {
	return "azblob://" + s.container + "/" + s.prefix + key
}

// Put implements Store with one Put Blob request (UploadBuffer sends objects
// up to 256 MiB whole), which Azure applies atomically.
func (s *azStore) Put(ctx context.Context, key string, data []byte) error {
	if err := blobstore.ValidateKey(key); err != nil {
		return fmt.Errorf("azblob put: %w", err)
	}
	if _, err := s.client.UploadBuffer(ctx, s.container, s.prefix+key, data, nil); err != nil {
		return s.fail(ctx, "put", key, err)
	}
	return nil
}

// PutIfAbsent implements Store with a Put Blob carrying If-None-Match: *.
// Azure answers 409 BlobAlreadyExists (or 412 ConditionNotMet) when the blob
// exists; both mean another writer got there.
//
// If a first attempt landed but its answer was lost, the SDK's retry meets
// the blob it wrote and this reports ErrExists: callers that must tell
// "mine" from "theirs" read the object back and compare.
func (s *azStore) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	if err := blobstore.ValidateKey(key); err != nil {
		return fmt.Errorf("azblob put-if-absent: %w", err)
	}
	etagAny := azcore.ETagAny
	_, err := s.client.UploadBuffer(ctx, s.container, s.prefix+key, data, &azblob.UploadBufferOptions{
		AccessConditions: &blob.AccessConditions{
			ModifiedAccessConditions: &blob.ModifiedAccessConditions{IfNoneMatch: &etagAny},
		},
	})
	if err != nil {
		if azConditionFailed(err) {
			return fmt.Errorf("azblob put-if-absent %s: %w", s.name(key), blobstore.ErrExists)
		}
		return s.fail(ctx, "put-if-absent", key, err)
	}
	return nil
}

// Get implements Store. The body is checked against the announced
// Content-Length so a truncated transfer surfaces as ErrShortRead.
func (s *azStore) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	if err := blobstore.ValidateKey(key); err != nil {
		return nil, fmt.Errorf("azblob get: %w", err)
	}
	out, err := s.client.DownloadStream(ctx, s.container, s.prefix+key, nil)
	if err != nil {
		return nil, s.fail(ctx, "get", key, err)
	}
	return blobstore.CheckedBody(ctx, out.Body, out.ContentLength, s.name(key), azUnreachable), nil
}

// List implements Store with a flat blob listing, page by page.
func (s *azStore) List(ctx context.Context, prefix string) ([]blobstore.ObjectInfo, error) {
	if err := blobstore.ValidatePrefix(prefix); err != nil {
		return nil, fmt.Errorf("azblob list: %w", err)
	}
	var opts azblob.ListBlobsFlatOptions
	if full := s.prefix + prefix; full != "" {
		opts.Prefix = &full
	}
	var out []blobstore.ObjectInfo
	pages := s.client.NewListBlobsFlatPager(s.container, &opts)
	for pages.More() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, s.fail(ctx, "list", prefix, err)
		}
		for _, item := range page.Segment.BlobItems {
			if item == nil || item.Name == nil {
				continue
			}
			key := strings.TrimPrefix(*item.Name, s.prefix)
			if key == "" || strings.HasSuffix(key, "/") {
				continue // directory marker, not an object
			}
			info := blobstore.ObjectInfo{Key: key}
			if p := item.Properties; p != nil {
				if p.ContentLength != nil {
					info.Size = *p.ContentLength
				}
				if p.LastModified != nil {
					info.Modified = *p.LastModified
				}
			}
			out = append(out, info)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, nil
}

// Delete implements Store with Delete Blob.
func (s *azStore) Delete(ctx context.Context, key string) error {
	if err := blobstore.ValidateKey(key); err != nil {
		return fmt.Errorf("azblob delete: %w", err)
	}
	_, err := s.client.DeleteBlob(ctx, s.container, s.prefix+key, nil)
	if err != nil && !azNotFound(err) {
		return s.fail(ctx, "delete", key, err)
	}
	return nil
}

// createContainer creates the store's container; one that exists already
// is fine. The store itself never creates containers (tests do).
func (s *azStore) createContainer(ctx context.Context) error {
	_, err := s.client.CreateContainer(ctx, s.container, &container.CreateOptions{})
	if err != nil && !bloberror.HasCode(err, bloberror.ContainerAlreadyExists) {
		return s.fail(ctx, "create container", "", err)
	}
	return nil
}

// fail wraps an SDK error with the operation, the object and, where it
// applies, ErrNotFound or ErrUnreachable.
func (s *azStore) fail(ctx context.Context, op, key string, err error) error {
	name := s.name(key)
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("azblob %s %s: %w", op, name, err)
	case azNotFound(err):
		return fmt.Errorf("azblob %s %s: %w: %w", op, name, blobstore.ErrNotFound, err)
	case azUnreachable(err):
		return fmt.Errorf("azblob %s %s: %w: %w", op, name, blobstore.ErrUnreachable, err)
	default:
		return fmt.Errorf("azblob %s %s: %w", op, name, err)
	}
}

// azResponse returns the service's answer carried by err, if any.
func azResponse(err error) (*azcore.ResponseError, bool) {
	var re *azcore.ResponseError
	ok := errors.As(err, &re)
	return re, ok
}

// azNotFound reports a missing blob (not a missing container, which is a
// configuration error).
func azNotFound(err error) bool {
	re, ok := azResponse(err)
	if !ok || re.StatusCode != http.StatusNotFound {
		return false
	}
	switch bloberror.Code(re.ErrorCode) {
	case bloberror.ContainerNotFound, bloberror.ResourceNotFound:
		return false
	}
	return true
}

// azConditionFailed reports a create-only write that met an existing blob.
func azConditionFailed(err error) bool {
	re, ok := azResponse(err)
	if !ok {
		return false
	}
	switch re.StatusCode {
	case http.StatusConflict:
		return bloberror.Code(re.ErrorCode) == bloberror.BlobAlreadyExists
	case http.StatusPreconditionFailed:
		return true
	}
	return false
}

// azUnreachable reports failures of the network or of the service itself,
// as opposed to answers about the request (not found, denied, bad request).
func azUnreachable(err error) bool {
	if errors.Is(err, context.Canceled) {
		return false
	}
	if re, ok := azResponse(err); ok {
		code := re.StatusCode
		return code == http.StatusRequestTimeout || code == http.StatusTooManyRequests ||
			(code >= 500 && code != http.StatusNotImplemented)
	}
	return blobstore.NetworkFailure(err)
}
