package config

import (
	"os"
	"strconv"

	"github.com/sluicehq/sluice/internal/credentials"
)

// View is the resolved configuration as `sluice validate-config --print-json`
// shows it. It holds no secret: passwords appear as the references the file
// gives, never as values.
type View struct {
	File     string                    `json:"file"`
	Temporal TemporalView              `json:"temporal"`
	Store    StoreView                 `json:"store"`
	Sources  map[string]ConnectionView `json:"sources"`
	Targets  map[string]ConnectionView `json:"targets"`
	// Origins gives, for each setting above, the layer its value came from.
	Origins map[string]Origin `json:"origins"`
}

// TemporalView is the Temporal connection in effect.
type TemporalView struct {
	Address   string `json:"address"`
	Namespace string `json:"namespace"`
	TaskQueue string `json:"task_queue"`
	TLS       bool   `json:"tls"`
	// The TLS files and the two references are shown only when set; the
	// references are variable names, never the secrets.
	TLSCA         string `json:"tls_ca,omitempty"`
	TLSCert       string `json:"tls_cert,omitempty"`
	TLSKey        string `json:"tls_key,omitempty"`
	TLSServerName string `json:"tls_server_name,omitempty"`
	APIKeyEnv     string `json:"api_key_env,omitempty"`
	PayloadKeyEnv string `json:"payload_key_env,omitempty"`
}

// StoreView is the store options in effect.
type StoreView struct {
	Endpoint  string `json:"endpoint"`
	Region    string `json:"region"`
	PathStyle bool   `json:"path_style"`
}

// ConnectionView is a named connection; its DSN holds no password.
type ConnectionView struct {
	Driver   string      `json:"driver"`
	DSN      string      `json:"dsn"`
	Password *SecretView `json:"password,omitempty"`
}

// SecretView shows a password reference and whether it resolves on this
// host (the worker resolves it on its own).
type SecretView struct {
	Env          string `json:"env,omitempty"`
	File         string `json:"file,omitempty"`
	ResolvesHere bool   `json:"resolves_here"`
}

// NewView builds the view of f with the settings Apply resolved.
func NewView(f *File, settings []Setting) View {
	v := View{File: f.Path, Sources: connViews(f.Sources), Targets: connViews(f.Targets), Origins: map[string]Origin{}}
	for _, s := range settings {
		v.Origins[s.Key] = s.Origin
		switch s.Key {
		case "temporal.address":
			v.Temporal.Address = s.Value
		case "temporal.namespace":
			v.Temporal.Namespace = s.Value
		case "temporal.task_queue":
			v.Temporal.TaskQueue = s.Value
		case "temporal.tls":
			v.Temporal.TLS, _ = strconv.ParseBool(s.Value)
		case "temporal.tls_ca":
			v.Temporal.TLSCA = s.Value
		case "temporal.tls_cert":
			v.Temporal.TLSCert = s.Value
		case "temporal.tls_key":
			v.Temporal.TLSKey = s.Value
		case "temporal.tls_server_name":
			v.Temporal.TLSServerName = s.Value
		case "temporal.api_key_env":
			v.Temporal.APIKeyEnv = s.Value
		case "temporal.payload_key_env":
			v.Temporal.PayloadKeyEnv = s.Value
		case "store.endpoint":
			v.Store.Endpoint = s.Value
		case "store.region":
			v.Store.Region = s.Value
		case "store.path_style":
			v.Store.PathStyle, _ = strconv.ParseBool(s.Value)
		}
	}
	return v
}

func connViews(conns map[string]Connection) map[string]ConnectionView {
	out := make(map[string]ConnectionView, len(conns))
	for name, c := range conns {
		cv := ConnectionView{Driver: c.Driver, DSN: credentials.Redact(c.DSN)}
		if !c.Password.IsZero() {
			cv.Password = &SecretView{Env: c.Password.Env, File: c.Password.File, ResolvesHere: resolvesHere(c.Password)}
		}
		out[name] = cv
	}
	return out
}

// resolvesHere checks that the reference points at something, without
// reading the secret.
func resolvesHere(r SecretRef) bool {
	if r.Env != "" {
		_, ok := os.LookupEnv(r.Env)
		return ok
	}
	fh, err := os.Open(r.File)
	if err != nil {
		return false
	}
	st, err := fh.Stat()
	fh.Close()
	return err == nil && st.Mode().IsRegular()
}
