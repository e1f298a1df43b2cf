// Package keyref carries the keys of a chain by reference: which
// environment variable or file holds a passphrase, an age identity or a
// signing key, which KMS key wraps the data keys. A Ref travels in Temporal
// workflow inputs and holds no secret; the worker (or the CLI, for the
// commands that run in its process) resolves it where it runs
// (docs/security.md, docs/configuration.md).
package keyref

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"strings"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/errcode"
	"github.com/sluicehq/sluice/internal/seal"
)

// Ref says where the keys of a chain are, never what they are. The zero
// Ref reads and writes plaintext, unsigned chains.
type Ref struct {
	// PassphraseEnv names an environment variable holding the passphrase
	// that wraps the chain's data keys (--key-passphrase-env).
	PassphraseEnv string `json:"passphrase_env,omitempty"`
	// PassphraseFile is a path whose content (one trailing newline
	// trimmed) is the passphrase (--key-passphrase-file).
	PassphraseFile string `json:"passphrase_file,omitempty"`
	// AgeRecipients are age public keys (age1…) the data keys are wrapped
	// to (--encrypt-to). Public: fine to carry.
	AgeRecipients []string `json:"age_recipients,omitempty"`
	// AgeRecipientsFile is a path of a file of age recipients, one a line
	// (--encrypt-to-file).
	AgeRecipientsFile string `json:"age_recipients_file,omitempty"`
	// AgeIdentityFile is a path of an age identity file, which unwraps
	// (--key-identity-file). Beside recipients it is a public-key writer's
	// own identity: the writer wraps its manifests' data key to it too,
	// and so reads back what it recorded, never the rows
	// (seal.NewAgeWriter).
	AgeIdentityFile string `json:"age_identity_file,omitempty"`
	// KMSKey is the AWS KMS key (ID, ARN or alias) that wraps the data keys
	// (--kms-key); KMSRegion and KMSEndpoint say where to reach it.
	KMSKey      string `json:"kms_key,omitempty"`
	KMSRegion   string `json:"kms_region,omitempty"`
	KMSEndpoint string `json:"kms_endpoint,omitempty"`
	// Encrypt makes a writer seal what it writes (--encrypt).
	Encrypt bool `json:"encrypt,omitempty"`
	// SignKeyFile is a path of an Ed25519 private key in PEM
	// (--sign-key-file); SignKeyEnv names an environment variable holding
	// one (--sign-key-env).
	SignKeyFile string `json:"sign_key_file,omitempty"`
	SignKeyEnv  string `json:"sign_key_env,omitempty"`
	// VerifyKeyFile is a path of the public key that verifies the chain's
	// signatures (--verify-key-file).
	VerifyKeyFile string `json:"verify_key_file,omitempty"`
	// RequireSignature refuses catalog generations without a signature
	// (--require-signature).
	RequireSignature bool `json:"require_signature,omitempty"`
}

// IsZero reports whether r names no key at all.
func (r Ref) IsZero() bool {
	return r.PassphraseEnv == "" && r.PassphraseFile == "" && len(r.AgeRecipients) == 0 && r.AgeRecipientsFile == "" &&
		r.AgeIdentityFile == "" && r.KMSKey == "" && r.KMSRegion == "" && r.KMSEndpoint == "" && !r.Encrypt &&
		r.SignKeyFile == "" && r.SignKeyEnv == "" && r.VerifyKeyFile == "" && !r.RequireSignature
}

// Wraps reports whether r names a key that wraps data keys (a passphrase,
// age recipients or an identity, a KMS key).
func (r Ref) Wraps() bool { return len(r.wrapping()) > 0 }

// CanRead reports whether r names a key that can unwrap data keys: every
// wrapping reference but age recipients.
func (r Ref) CanRead() bool {
	return r.PassphraseEnv != "" || r.PassphraseFile != "" || r.AgeIdentityFile != "" || r.KMSKey != ""
}

// Flag names of the references, for messages.
const (
	FlagPassphraseEnv     = "key-passphrase-env"
	FlagPassphraseFile    = "key-passphrase-file"
	FlagAgeRecipients     = "encrypt-to"
	FlagAgeRecipientsFile = "encrypt-to-file"
	FlagAgeIdentityFile   = "key-identity-file"
	FlagKMSKey            = "kms-key"
	FlagKMSRegion         = "kms-region"
	FlagKMSEndpoint       = "kms-endpoint"
	FlagEncrypt           = "encrypt"
	FlagSignKeyFile       = "sign-key-file"
	FlagSignKeyEnv        = "sign-key-env"
	FlagVerifyKeyFile     = "verify-key-file"
	FlagRequireSignature  = "require-signature"
)

// ageWriter reports whether r names recipients and an identity of the
// writer's own: the one pair of wrapping references that go together.
func (r Ref) ageWriter() bool {
	return r.AgeIdentityFile != "" && (len(r.AgeRecipients) > 0 || r.AgeRecipientsFile != "")
}

// wrapping lists the wrapping references r sets, by flag (the recipients
// and their file count as one).
func (r Ref) wrapping() []string {
	var out []string
	if r.PassphraseEnv != "" {
		out = append(out, FlagPassphraseEnv)
	}
	if r.PassphraseFile != "" {
		out = append(out, FlagPassphraseFile)
	}
	if r.AgeIdentityFile != "" {
		out = append(out, FlagAgeIdentityFile)
	}
	switch {
	case len(r.AgeRecipients) > 0:
		out = append(out, FlagAgeRecipients)
	case r.AgeRecipientsFile != "":
		out = append(out, FlagAgeRecipientsFile)
	}
	if r.KMSKey != "" {
		out = append(out, FlagKMSKey)
	}
	return out
}

// Validate checks r without resolving anything, naming the flags as the
// CLI spells them. Usage errors are errcode.Usage; --encrypt without a key
// to wrap with is errcode.KeyRequired.
func (r Ref) Validate() error { return r.ValidateNamed("") }

// ValidateNamed is Validate with each flag named with prefix after its
// dashes (rekey's "new-": --new-key-passphrase-env).
func (r Ref) ValidateNamed(prefix string) error {
	flag := func(name string) string { return "--" + prefix + name }
	flags := func(names []string) string {
		out := make([]string, len(names))
		for i, n := range names {
			out[i] = flag(n)
		}
		return strings.Join(out, ", ")
	}
	usage := func(format string, args ...any) error { return errcode.New(errcode.Usage, format, args...) }
	for _, env := range []struct{ name, v string }{{FlagPassphraseEnv, r.PassphraseEnv}, {FlagSignKeyEnv, r.SignKeyEnv}} {
		if env.v != "" && !validEnvName(env.v) {
			// Not echoed: it may be the secret itself, given by mistake.
			return usage("%s takes the name of an environment variable (letters, digits and _, not starting with a digit), never the secret itself", flag(env.name))
		}
	}
	for _, p := range []struct{ name, v string }{{FlagPassphraseFile, r.PassphraseFile}, {FlagAgeRecipientsFile, r.AgeRecipientsFile},
		{FlagAgeIdentityFile, r.AgeIdentityFile}, {FlagSignKeyFile, r.SignKeyFile}, {FlagVerifyKeyFile, r.VerifyKeyFile}} {
		if p.v != "" && (strings.TrimSpace(p.v) != p.v || strings.ContainsAny(p.v, "\x00\n")) {
			return usage("%s %q: give a path, without surrounding spaces or line breaks", flag(p.name), p.v)
		}
	}
	if w := r.wrapping(); len(w) > 1 && !(len(w) == 2 && r.ageWriter()) {
		return usage("%s each name the key that wraps the chain's data keys: give one (age recipients may come with the writer's own --%s)", flags(w), FlagAgeIdentityFile)
	}
	for _, rc := range r.AgeRecipients {
		rc = strings.TrimSpace(rc)
		switch {
		case rc == "":
			return usage("%s is empty: give an age recipient (age1…)", flag(FlagAgeRecipients))
		case strings.HasPrefix(strings.ToUpper(rc), "AGE-SECRET-KEY-"):
			// An identity is a secret: it must not reach a workflow input.
			return usage("%s was given an age identity (a secret key), not a recipient: give its public key (age-keygen -y), and the identity file to the reading side with --key-identity-file", flag(FlagAgeRecipients))
		}
		if _, err := seal.NewAgeRecipients(rc, flag(FlagAgeRecipients)); err != nil {
			return usage("%s %q is not an age recipient (age1…): %v", flag(FlagAgeRecipients), rc, err)
		}
	}
	if r.KMSKey == "" && (r.KMSRegion != "" || r.KMSEndpoint != "") {
		return usage("%s and %s say where the KMS key is: they need %s", flag(FlagKMSRegion), flag(FlagKMSEndpoint), flag(FlagKMSKey))
	}
	if r.KMSEndpoint != "" {
		// Not echoed whole: a URL may carry a password.
		u, err := url.Parse(r.KMSEndpoint)
		switch {
		case err != nil:
			return usage("%s does not parse as a URL: give an http:// or https:// URL", flag(FlagKMSEndpoint))
		case u.User != nil:
			return usage("%s %s: credentials in the URL are not accepted (it is recorded in workflow history); the AWS credential chain supplies them", flag(FlagKMSEndpoint), u.Redacted())
		case (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
			return usage("%s %s: give an http:// or https:// URL", flag(FlagKMSEndpoint), u.Redacted())
		}
	}
	if (len(r.AgeRecipients) > 0 || r.AgeRecipientsFile != "") && !r.Encrypt {
		return usage("%s wrap data keys a writer draws; they need %s", flags([]string{FlagAgeRecipients, FlagAgeRecipientsFile}), flag(FlagEncrypt))
	}
	if r.Encrypt && !r.Wraps() {
		return errcode.New(errcode.KeyRequired, "%s needs a key to wrap the chain's data keys: %s", flag(FlagEncrypt),
			flags([]string{FlagPassphraseEnv, FlagPassphraseFile, FlagAgeRecipients, FlagAgeRecipientsFile, FlagAgeIdentityFile, FlagKMSKey}))
	}
	if r.SignKeyFile != "" && r.SignKeyEnv != "" {
		return usage("%s and %s both name the signing key: give one", flag(FlagSignKeyFile), flag(FlagSignKeyEnv))
	}
	if r.RequireSignature && r.VerifyKeyFile == "" {
		return usage("%s needs %s, the public key the signatures are checked with", flag(FlagRequireSignature), flag(FlagVerifyKeyFile))
	}
	return nil
}

func validEnvName(s string) bool {
	for i, c := range s {
		if !(c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return s != ""
}

// material is what r's references resolved to where they were resolved:
// the secrets, read once, so the wrappers built from them and the cache
// keys derived from them agree.
type material struct {
	passphrase     []byte
	passSource     string
	recipients     string
	recSource      string
	identities     string
	idSource       string
	signPEM        []byte
	signSource     string
	verifyPEM      []byte
	verifySource   string
	kms            bool
	kmsKey, kmsReg string
	kmsEndpoint    string
}

// resolve reads every secret r references in this process's environment:
// errcode.SecretUnresolved, naming the variable or path, for one that is
// unset, empty or unreadable.
func (r Ref) resolve() (*material, error) {
	m := &material{}
	var err error
	switch {
	case r.PassphraseEnv != "":
		m.passSource = "environment variable " + r.PassphraseEnv
		if m.passphrase, err = fromEnv(r.PassphraseEnv, "the passphrase"); err != nil {
			return nil, err
		}
	case r.PassphraseFile != "":
		m.passSource = "file " + r.PassphraseFile
		b, err := fromFile(r.PassphraseFile, "passphrase file")
		if err != nil {
			return nil, err
		}
		m.passphrase = []byte(strings.TrimRight(string(b), "\r\n"))
		if len(m.passphrase) == 0 {
			return nil, errcode.New(errcode.SecretUnresolved, "passphrase file %s is empty", r.PassphraseFile)
		}
	case r.KMSKey != "":
		m.kms, m.kmsKey, m.kmsReg, m.kmsEndpoint = true, r.KMSKey, r.KMSRegion, r.KMSEndpoint
	}
	if r.AgeIdentityFile != "" {
		m.idSource = r.AgeIdentityFile
		b, err := fromFile(r.AgeIdentityFile, "age identity file")
		if err != nil {
			return nil, err
		}
		m.identities = string(b)
	}
	if len(r.AgeRecipients) > 0 || r.AgeRecipientsFile != "" {
		var text []string
		var from []string
		if len(r.AgeRecipients) > 0 {
			text = append(text, r.AgeRecipients...)
			from = append(from, "--encrypt-to")
		}
		if r.AgeRecipientsFile != "" {
			b, err := fromFile(r.AgeRecipientsFile, "age recipients file")
			if err != nil {
				return nil, err
			}
			text = append(text, string(b))
			from = append(from, r.AgeRecipientsFile)
		}
		m.recipients, m.recSource = strings.Join(text, "\n"), strings.Join(from, " and ")
	}
	switch {
	case r.SignKeyFile != "":
		m.signSource = "file " + r.SignKeyFile
		if m.signPEM, err = fromFile(r.SignKeyFile, "signing key file"); err != nil {
			return nil, err
		}
	case r.SignKeyEnv != "":
		m.signSource = "environment variable " + r.SignKeyEnv
		if m.signPEM, err = fromEnv(r.SignKeyEnv, "the signing key"); err != nil {
			return nil, err
		}
	}
	if r.VerifyKeyFile != "" {
		m.verifySource = "file " + r.VerifyKeyFile
		if m.verifyPEM, err = fromFile(r.VerifyKeyFile, "verify key file"); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func fromEnv(name, what string) ([]byte, error) {
	v, ok := os.LookupEnv(name)
	if !ok {
		return nil, errcode.New(errcode.SecretUnresolved, "environment variable %s (%s) is not set in this process (the worker, or the CLI for commands that run in it)", name, what)
	}
	if v == "" {
		return nil, errcode.New(errcode.SecretUnresolved, "environment variable %s (%s) is set but empty", name, what)
	}
	return []byte(v), nil
}

func fromFile(path, what string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, errcode.Wrap(errcode.SecretUnresolved, err, "%s %s is unreadable", what, path)
	}
	return b, nil
}

// wrappers is what m's wrapping references resolve to: the wrapper of the
// chain's data keys, and for a public-key writer with an identity of its
// own the wrapper of its manifests' key (chain.Trust.ManifestWrapper).
type wrappers struct {
	w, manifests seal.Wrapper
}

// wrappers builds the wrappers m's wrapping references name; none when it
// names none.
func (m *material) wrappers(ctx context.Context) (wrappers, error) {
	var out wrappers
	var err error
	switch {
	case m.passphrase != nil:
		out.w, err = seal.NewPassphrase(m.passphrase, m.passSource)
	case m.kms:
		out.w, err = newKMS(ctx, m.kmsKey, m.kmsReg, m.kmsEndpoint)
	case m.idSource != "" && m.recSource != "":
		rcpt, err := seal.NewAgeRecipients(m.recipients, m.recSource)
		if err != nil {
			return out, err
		}
		own, err := seal.NewAgeIdentities(m.identities, m.idSource)
		if err != nil {
			return out, err
		}
		out.w, out.manifests = seal.NewAgeWriter(rcpt, own)
	case m.idSource != "":
		out.w, err = seal.NewAgeIdentities(m.identities, m.idSource)
	case m.recSource != "":
		out.w, err = seal.NewAgeRecipients(m.recipients, m.recSource)
	}
	if err != nil {
		return wrappers{}, err
	}
	return out, nil
}

// Wrapper resolves r's wrapping reference: the wrapper of the chain's data
// keys, nil when r names none. For a public-key writer (recipients and its
// own identity) it is the wrapper of its chunks' keys.
func (r Ref) Wrapper(ctx context.Context) (seal.Wrapper, error) {
	if err := r.Validate(); err != nil {
		return nil, err
	}
	m, err := r.resolve()
	if err != nil {
		return nil, err
	}
	ws, err := m.wrappers(ctx)
	return ws.w, err
}

// Trust resolves every reference of r in this process's environment into
// what a chain handle seals, opens, signs and verifies with.
func (r Ref) Trust(ctx context.Context) (chain.Trust, error) {
	if err := r.Validate(); err != nil {
		return chain.Trust{}, err
	}
	m, err := r.resolve()
	if err != nil {
		return chain.Trust{}, err
	}
	ws, err := m.wrappers(ctx)
	if err != nil {
		return chain.Trust{}, err
	}
	return m.trust(r, ws)
}

// trust completes a Trust around the wrappers ws built from m.
func (m *material) trust(r Ref, ws wrappers) (chain.Trust, error) {
	t := chain.Trust{Wrapper: ws.w, ManifestWrapper: ws.manifests, Encrypt: r.Encrypt, RequireSignature: r.RequireSignature}
	var err error
	if m.signPEM != nil {
		if t.Signer, err = seal.ParseSigningKey(m.signPEM, m.signSource); err != nil {
			return chain.Trust{}, err
		}
	}
	if m.verifyPEM != nil {
		if t.Verifier, err = seal.ParseVerifyKey(m.verifyPEM, m.verifySource); err != nil {
			return chain.Trust{}, err
		}
	}
	return t, nil
}

// String describes r by reference, for messages.
func (r Ref) String() string {
	var parts []string
	add := func(flag, v string) {
		if v != "" {
			parts = append(parts, fmt.Sprintf("--%s %s", flag, v))
		}
	}
	add(FlagPassphraseEnv, r.PassphraseEnv)
	add(FlagPassphraseFile, r.PassphraseFile)
	for _, rc := range r.AgeRecipients {
		add(FlagAgeRecipients, rc)
	}
	add(FlagAgeRecipientsFile, r.AgeRecipientsFile)
	add(FlagAgeIdentityFile, r.AgeIdentityFile)
	add(FlagKMSKey, r.KMSKey)
	add(FlagKMSRegion, r.KMSRegion)
	add(FlagKMSEndpoint, r.KMSEndpoint)
	if r.Encrypt {
		parts = append(parts, "--"+FlagEncrypt)
	}
	add(FlagSignKeyFile, r.SignKeyFile)
	add(FlagSignKeyEnv, r.SignKeyEnv)
	add(FlagVerifyKeyFile, r.VerifyKeyFile)
	if r.RequireSignature {
		parts = append(parts, "--"+FlagRequireSignature)
	}
	if len(parts) == 0 {
		return "no key"
	}
	return strings.Join(parts, " ")
}
