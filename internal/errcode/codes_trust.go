package errcode

// The chain as a trust boundary: keys, seals and signatures
// (docs/security.md). Refusals of what the store holds exit 3; a key the
// operator did not give, or gave wrongly, exits 2; a key service that does
// not answer is transient (exit 1) and retried.
var (
	KeyRequired = register("SLUICE-E-KEY-REQUIRED", ExitUsage,
		"A key the command needs was not given: the chain is encrypted and no key was given to read it (or only age recipients, which write but cannot read), --encrypt was asked for without a key to wrap the chain's data keys, or the chain is signed and a writer has no signing key to sign what it commits.",
		"Pass the key the message names: to read or encrypt, --key-passphrase-env VAR or --key-passphrase-file PATH, --key-identity-file PATH (age), or --kms-key ID (AWS KMS); to commit to a signed chain, --sign-key-file PATH or --sign-key-env VAR. The worker reads the variable or file; the key itself never crosses Temporal.")
	KeyWrong = register("SLUICE-E-KEY-WRONG", ExitRefused,
		"The key given does not open the chain's data key: a wrong passphrase, an age identity that is not among the recipients, a KMS key that did not wrap it, or a wrapping of another kind than the key given.",
		"Check which key the chain was written with: each object under keys/ in the store names its data key's wrapping (passphrase, age, or the KMS key ID), never the key. Pass that key. After a `sluice backup rekey`, pass the new key.")
	KeyUnavailable = register("SLUICE-E-KEY-UNAVAILABLE", ExitRuntime,
		"The key service (AWS KMS or its emulator) did not answer or refused the request for a reason retrying can fix; nothing was read or written with the key.",
		"Check the KMS endpoint (--kms-endpoint or AWS_ENDPOINT_URL_KMS), the region and the worker's AWS credentials. A broker retries and reports the stalled verdict with this cause until the service answers.")
	ChunkSealBroken = register("SLUICE-E-CHUNK-SEAL-BROKEN", ExitRefused,
		"An encrypted chunk or manifest fails authentication: its bytes were changed, or it was moved, swapped or copied from another place, link or chain. Nothing of it was decoded or applied.",
		"The store holds bytes sluice did not write at that place. Treat the store as tampered with (docs/security.md): restore the object from a copy you trust, or take a new full into a new chain, and check who can write the store.")
	ChainNotSealed = register("SLUICE-E-CHAIN-NOT-SEALED", ExitRefused,
		"A key was given, but the chain (or one of its links) is not encrypted. A reader given a key accepts only sealed links, so plaintext put in place of a sealed link is never applied.",
		"If the chain was written without --encrypt, run the command without a key. Otherwise the store was tampered with: see docs/security.md.")
	SignatureMissing = register("SLUICE-E-SIGNATURE-MISSING", ExitRefused,
		"--require-signature was given and a catalog generation of the chain carries no signature (an unsigned chain, or a signature removed). Nothing of the generations after the last signed one was applied.",
		"Sign the chain's producer (--sign-key-file or --sign-key-env on `sluice backup full` and `sluice backup stream run`). If the producer signs, someone removed signatures from the store: treat it as tampered with (docs/security.md).")
	SignatureInvalid = register("SLUICE-E-SIGNATURE-INVALID", ExitRefused,
		"A catalog generation's signature does not verify with the key given (--verify-key-file): the generation was changed after signing, or signed by another key. Nothing it names was applied.",
		"Check that --verify-key-file holds the public key of the producer's --sign-key-file (`sluice backup keygen` wrote both). If it does, the store was tampered with: see docs/security.md.")
	ChainRolledBack = register("SLUICE-E-CHAIN-ROLLED-BACK", ExitRefused,
		"The chain's latest catalog generation is older than the one this target verified last, or differs from it: catalog objects were deleted (a truncated tail) or older ones put back (a rollback). Nothing was applied.",
		"The store no longer holds what this target already applied. Find out who rewrote the store; restore it from a copy holding at least the generation the message names, or rebuild the target from a chain you trust (`sluice broker reset`).")
)
