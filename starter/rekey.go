package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/activities"
	"github.com/sluicehq/sluice/internal/blobstore"
	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/errcode"
	"github.com/sluicehq/sluice/internal/keyref"
	"github.com/sluicehq/sluice/internal/seal"
)

func (c *cli) keygenCmd() *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:   "keygen",
		Short: "Write a new Ed25519 key pair: PATH signs a chain's catalog generations, PATH.pub verifies them",
		Long: `Writes a new Ed25519 private key to --out PATH (PEM, PKCS #8, mode 0600) and its
public key to PATH.pub (PEM, PKIX), and prints the key's ID, which every signature
records. Neither file is overwritten: keygen refuses when either exists.

The producer's site keeps PATH and signs with --sign-key-file PATH (or
--sign-key-env VAR holding its content) on backup full, backup stream run, backup
incremental, compact and prune; the reading sites get PATH.pub and verify with
--verify-key-file PATH.pub, --require-signature refusing an unsigned chain.`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			if out == "" {
				return usageError("--out PATH is required: where the private key goes (its public key goes to PATH.pub)")
			}
			pub := out + ".pub"
			for _, p := range []string{out, pub} {
				if _, err := os.Lstat(p); err == nil {
					return usageError("%s exists: keygen never overwrites a key; choose another --out, or move the old key away first", p)
				} else if !errors.Is(err, fs.ErrNotExist) {
					return errcode.Wrap(errcode.ConfigInvalid, err, "--out %s", out)
				}
			}
			privPEM, pubPEM, id, err := seal.GenerateSigningKey()
			if err != nil {
				return err
			}
			if err := writeNewFile(out, privPEM, 0o600); err != nil {
				return err
			}
			if err := writeNewFile(pub, pubPEM, 0o644); err != nil {
				os.Remove(out)
				return err
			}
			fmt.Fprintf(c.stdout, "signing key %s\n", id)
			fmt.Fprintf(c.stdout, "private key: %s (mode 0600; keep it secret: the producer signs with --sign-key-file %s)\n", out, out)
			fmt.Fprintf(c.stdout, "public key:  %s (readers verify with --verify-key-file %s --require-signature)\n", pub, pub)
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "path of the private key to write; the public key goes to PATH.pub (required)")
	return cmd
}

// writeNewFile creates path with mode, refusing one that exists.
func writeNewFile(path string, data []byte, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		if errors.Is(err, fs.ErrExist) {
			return usageError("%s exists: keygen never overwrites a key", path)
		}
		return errcode.Wrap(errcode.ConfigInvalid, err, "write %s", path)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		os.Remove(path)
		return errcode.Wrap(errcode.ConfigInvalid, err, "write %s", path)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		os.Remove(path)
		return errcode.Wrap(errcode.ConfigInvalid, err, "write %s", path)
	}
	return f.Close()
}

func (c *cli) rekeyCmd() *cobra.Command {
	var store storeFlags
	var target string
	var next keyref.Ref
	var dryRun bool
	cmd := &cobra.Command{
		Use:   "rekey",
		Short: "Rewrap every data key of an encrypted chain under a new passphrase, age recipients or KMS key; no chunk is rewritten (reads and writes the store directly; no worker needed)",
		Long: `A chain's chunks are sealed under data keys; the store holds each data key
wrapped (keys/<id>.json). Rekey opens every one of them with the current key
(--key-passphrase-env/-file, --key-identity-file or --kms-key) and wraps it with
the new one (--new-key-passphrase-env/-file, --new-encrypt-to/-file or
--new-kms-key). Nothing else changes: chunks, manifests and the catalog stay as
they are, and so do the data keys.

Every envelope is opened before any is written: when the current key does not
open one of them, rekey refuses with SLUICE-E-KEY-WRONG and writes nothing. An
envelope the new key already opens (a rekey interrupted earlier) is left as it
is, so running rekey again finishes one. --dry-run opens them all and writes
nothing.

Readers and writers started afterwards need the new key. Running ones keep the
data keys they already opened; a writer that draws a new data key wraps it with
the key it was started with, so restart writers with the new key and run rekey
again afterwards to catch a key drawn meanwhile.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, err := store.ref("--target", target)
			if err != nil {
				return err
			}
			if !st.Trust.CanRead() {
				return errcode.New(errcode.KeyRequired, "rekey opens every data key with the chain's current key: give it with --key-passphrase-env, --key-passphrase-file, --key-identity-file or --kms-key")
			}
			next.Encrypt = next.Wraps() // recipients are valid only where something is sealed
			if !next.Wraps() {
				return usageError("give the new key: --new-key-passphrase-env VAR, --new-key-passphrase-file PATH, --new-encrypt-to age1… or --new-kms-key ID")
			}
			if err := next.ValidateNamed("new-"); err != nil {
				return err
			}
			res, err := rekeyChain(cmd.Context(), st, next, dryRun)
			if err != nil {
				return err
			}
			switch {
			case dryRun:
				fmt.Fprintf(c.stdout, "dry run: all %d data keys of %s open; %d would be rewrapped with %s (%d already are); nothing was written\n",
					res.Keys, st.URL, res.Rewrapped, res.To, res.Already)
			default:
				fmt.Fprintf(c.stdout, "rewrapped %d data keys of %s with %s (%d already were); no chunk was rewritten\n",
					res.Rewrapped, st.URL, res.To, res.Already)
				fmt.Fprintf(c.stdout, "give every reader and writer the new key from now on; restart running ones, then run rekey again to catch a data key a writer drew meanwhile\n")
			}
			return nil
		},
	}
	store.bind(cmd)
	store.bindKeys(cmd, keysOpen, readHere)
	cmd.Flags().StringVar(&target, "target", "", "backup store URL of the chain: "+blobstore.Forms())
	fl := cmd.Flags()
	fl.StringVar(&next.PassphraseEnv, "new-key-passphrase-env", "", "name of an environment variable, read by this process, holding the new passphrase")
	fl.StringVar(&next.PassphraseFile, "new-key-passphrase-file", "", "path of a file, read by this process, holding the new passphrase; a trailing newline is not part of it")
	fl.StringArrayVar(&next.AgeRecipients, "new-encrypt-to", nil, "an age recipient (age1…) to wrap the data keys to (repeatable)")
	fl.StringVar(&next.AgeRecipientsFile, "new-encrypt-to-file", "", "path of a file of age recipients, one a line")
	fl.StringVar(&next.KMSKey, "new-kms-key", "", "AWS KMS key (ID, ARN or alias) to wrap the data keys with")
	fl.StringVar(&next.KMSRegion, "new-kms-region", "", "with --new-kms-key: its region")
	fl.StringVar(&next.KMSEndpoint, "new-kms-endpoint", "", "with --new-kms-key: the KMS endpoint URL")
	fl.BoolVar(&dryRun, "dry-run", false, "open every data key with the current key and write nothing")
	return cmd
}

// rekeyResult is what a rekey did: how many data keys the chain has, how
// many it rewrapped (or would), how many the new key already opened.
type rekeyResult struct {
	Keys, Rewrapped, Already int
	To                       string
}

// rekeyChain rewraps every data key envelope of the chain st names from
// st's key to the key next names. Every envelope is opened first; nothing
// is written unless all open.
func rekeyChain(ctx context.Context, st activities.StoreRef, next keyref.Ref, dryRun bool) (rekeyResult, error) {
	var res rekeyResult
	bs, err := blobstore.Open(ctx, st.URL, st.Options)
	if err != nil {
		return res, errcode.Wrap(errcode.ConfigInvalid, err, "open backup store %s", st.URL)
	}
	ch := chain.Open(bs)
	from, err := st.Trust.Wrapper(ctx)
	if err != nil {
		return res, err
	}
	to, err := next.Wrapper(ctx)
	if err != nil {
		return res, err
	}
	res.To = to.String()
	ids, err := ch.ListEnvelopes(ctx)
	if err != nil {
		return res, err
	}
	if len(ids) == 0 {
		return res, errcode.New(errcode.ChainNotSealed, "%s holds no data key (nothing under %s): the chain is not encrypted, and there is nothing to rekey", st.URL, chain.KeysPrefix)
	}
	res.Keys = len(ids)
	var rewrapped []*seal.Envelope
	for _, id := range ids {
		env, err := ch.ReadEnvelope(ctx, id)
		if err != nil {
			return res, prefixed(err, "rekey of %s refused, nothing written: data key %s", st.URL, id)
		}
		out, err := env.Rewrap(ctx, from, to)
		if err != nil {
			if errcode.Is(err, errcode.KeyWrong) && next.CanRead() {
				if _, nerr := env.Open(ctx, to); nerr == nil {
					res.Already++
					continue
				}
			}
			return res, prefixed(err, "rekey of %s refused, nothing written: data key %s", st.URL, id)
		}
		rewrapped = append(rewrapped, out)
	}
	res.Rewrapped = len(rewrapped)
	if dryRun {
		return res, nil
	}
	for i, env := range rewrapped {
		if err := ch.ReplaceEnvelope(ctx, env); err != nil {
			return res, prefixed(err, "rekey of %s stopped after rewrapping %d of %d data keys (run it again with the same flags: keys the new key opens are skipped)", st.URL, i, len(rewrapped))
		}
	}
	return res, nil
}

// prefixed says what a coded error interrupted, keeping its code and hint.
func prefixed(err error, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	if e, ok := errcode.As(err); ok {
		return &errcode.Error{Code: e.Code, Message: msg + ": " + e.Message, Hint: e.Hint, Err: e.Err}
	}
	return fmt.Errorf("%s: %w", msg, err)
}
