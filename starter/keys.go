package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/activities"
	"github.com/sluicehq/sluice/internal/blobstore"
	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/errcode"
	"github.com/sluicehq/sluice/internal/keyref"
)

// keyUse says which key flags a command takes (docs/configuration.md).
type keyUse int

const (
	// keysOpen: the key that wraps the chain's data keys, to open them
	// (--key-passphrase-env/-file, --key-identity-file, --kms-key).
	keysOpen keyUse = 1 << iota
	// keysVerify: --verify-key-file, --require-signature.
	keysVerify
	// keysSign: --sign-key-file, --sign-key-env (writers that commit).
	keysSign
	// keysEncrypt: --encrypt, --encrypt-to, --encrypt-to-file (writers
	// that write chunks).
	keysEncrypt
	// keysImplyEncrypt: a command that rewrites a chain's chunks (compact)
	// seals them when it is given the chain's key.
	keysImplyEncrypt
)

// keyFlags name the keys of a chain by reference: the flags hold variable
// names and paths, resolved by the worker (or by this process for the
// commands that run in it), never a key.
type keyFlags struct {
	use                                         keyUse
	passphraseEnv, passphraseFile, identityFile string
	kmsKey, kmsRegion, kmsEndpoint              string
	encrypt                                     bool
	encryptTo                                   []string
	encryptToFile                               string
	signKeyFile, signKeyEnv                     string
	verifyKeyFile                               string
	requireSignature                            bool
}

// Where key references are resolved, for the flags' help.
const (
	readByWorker = "read by the worker"
	readHere     = "read by this process"
	readEither   = "read by the worker (by this process with --local)"
)

// bind registers the flags use names; where says who reads the
// references.
func (k *keyFlags) bind(cmd *cobra.Command, use keyUse, where string) {
	k.use = use
	fs := cmd.Flags()
	if use&keysOpen != 0 {
		what := "the passphrase that wraps the chain's data keys (stretched with Argon2id)"
		fs.StringVar(&k.passphraseEnv, "key-passphrase-env", "", "name of an environment variable, "+where+", holding "+what)
		fs.StringVar(&k.passphraseFile, "key-passphrase-file", "", "path of a file, "+where+", holding "+what+"; a trailing newline is not part of it")
		identity := "path of an age identity file, " + where + ", that opens the chain's data keys"
		if use&keysEncrypt != 0 {
			identity += "; beside --encrypt-to, the writer's own identity: it reads back the manifests it wrote, never the rows"
		}
		fs.StringVar(&k.identityFile, "key-identity-file", "", identity)
		fs.StringVar(&k.kmsKey, "kms-key", "", "AWS KMS key (ID, ARN or alias) that wraps the chain's data keys; credentials from the AWS configuration, "+where)
		fs.StringVar(&k.kmsRegion, "kms-region", "", "with --kms-key: the key's region (default: the AWS configuration's)")
		fs.StringVar(&k.kmsEndpoint, "kms-endpoint", "", "with --kms-key: the KMS endpoint URL (default: AWS's; AWS_ENDPOINT_URL_KMS also applies)")
	}
	if use&keysEncrypt != 0 {
		fs.BoolVar(&k.encrypt, "encrypt", false, "seal what is written (chunks, manifests, recorded schema) under a data key wrapped by the key given; every writer of an encrypted chain needs it")
		fs.StringArrayVar(&k.encryptTo, "encrypt-to", nil, "an age recipient (age1…) to wrap the data keys to (repeatable; implies --encrypt): a site holding only recipients writes the chain and cannot read it")
		fs.StringVar(&k.encryptToFile, "encrypt-to-file", "", "path of a file of age recipients, one a line, "+where+" (implies --encrypt)")
	}
	if use&keysSign != 0 {
		fs.StringVar(&k.signKeyFile, "sign-key-file", "", "path of the Ed25519 private key (`sluice backup keygen`), "+where+", that signs every catalog generation written")
		fs.StringVar(&k.signKeyEnv, "sign-key-env", "", "name of an environment variable, "+where+", holding that private key's PEM")
	}
	if use&keysVerify != 0 {
		fs.StringVar(&k.verifyKeyFile, "verify-key-file", "", "path of the public key (the .pub `sluice backup keygen` wrote), "+where+", that verifies the chain's signatures")
		fs.BoolVar(&k.requireSignature, "require-signature", false, "refuse a catalog generation that carries no signature (needs --verify-key-file)")
	}
}

// ref checks the flags and returns the reference the store reference
// carries.
func (k *keyFlags) ref() (keyref.Ref, error) {
	r := keyref.Ref{
		PassphraseEnv: k.passphraseEnv, PassphraseFile: k.passphraseFile, AgeIdentityFile: k.identityFile,
		KMSKey: k.kmsKey, KMSRegion: k.kmsRegion, KMSEndpoint: k.kmsEndpoint,
		AgeRecipients: k.encryptTo, AgeRecipientsFile: k.encryptToFile,
		Encrypt:     k.encrypt || len(k.encryptTo) > 0 || k.encryptToFile != "",
		SignKeyFile: k.signKeyFile, SignKeyEnv: k.signKeyEnv,
		VerifyKeyFile: k.verifyKeyFile, RequireSignature: k.requireSignature,
	}
	if err := r.Validate(); err != nil {
		return keyref.Ref{}, err
	}
	if k.use&keysImplyEncrypt != 0 && r.CanRead() {
		r.Encrypt = true
	}
	if k.use&keysEncrypt != 0 && r.Wraps() && !r.Encrypt {
		return keyref.Ref{}, usageError("%s names the key the chain's data keys are wrapped with, and a writer given it seals what it writes: add --encrypt (an encrypted chain's writers all seal), or leave the key out for a plaintext chain", givenWrapping(r))
	}
	return r, nil
}

// given reports whether any key flag was set.
func (k *keyFlags) given() bool {
	return k.passphraseEnv != "" || k.passphraseFile != "" || k.identityFile != "" || k.kmsKey != "" || k.kmsRegion != "" ||
		k.kmsEndpoint != "" || k.encrypt || len(k.encryptTo) > 0 || k.encryptToFile != "" || k.signKeyFile != "" ||
		k.signKeyEnv != "" || k.verifyKeyFile != "" || k.requireSignature
}

// givenWrapping names the wrapping flag r was given.
func givenWrapping(r keyref.Ref) string {
	switch {
	case r.PassphraseEnv != "":
		return "--" + keyref.FlagPassphraseEnv
	case r.PassphraseFile != "":
		return "--" + keyref.FlagPassphraseFile
	case r.AgeIdentityFile != "":
		return "--" + keyref.FlagAgeIdentityFile
	case r.KMSKey != "":
		return "--" + keyref.FlagKMSKey
	}
	return "--" + keyref.FlagAgeRecipients
}

// openChainHere opens the chain st names in this process, with its key
// references resolved here: the commands that read or write the store
// directly (prune, verify-chain, compact --local, rekey).
func openChainHere(ctx context.Context, st activities.StoreRef) (*chain.Chain, error) {
	bs, err := blobstore.Open(ctx, st.URL, st.Options)
	if err != nil {
		return nil, errcode.Wrap(errcode.ConfigInvalid, err, "open backup store %s", st.URL)
	}
	ch := chain.Open(bs)
	if st.Trust.IsZero() {
		return ch, nil
	}
	t, err := st.Trust.Trust(ctx)
	if err != nil {
		return nil, err
	}
	return ch.WithKeyring(chain.NewKeyring(t)), nil
}

// warnUnencrypted prints the one line `backup full` says when it writes a
// plaintext chain to a store other than a local folder.
func (c *cli) warnUnencrypted(st activities.StoreRef) {
	if st.Trust.Encrypt || strings.HasPrefix(st.URL, "file://") {
		return
	}
	fmt.Fprintf(c.stderr, "warning: the chain at %s will be stored unencrypted: whoever can read the store reads the data; to seal it, pass --encrypt with --key-passphrase-env VAR, --kms-key ID or --encrypt-to age1… (docs/operations.md)\n", st.URL)
}
