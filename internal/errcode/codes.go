package errcode

// Usage and configuration (exit 2).
var (
	Usage = register("SLUICE-E-USAGE", ExitUsage,
		"The command line is malformed: an unknown flag, a missing required flag, or a bad value.",
		"Run the command with --help and correct the flag the message names.")
	ConfigInvalid = register("SLUICE-E-CONFIG-INVALID", ExitUsage,
		"A setting has a value sluice cannot use (a malformed URL or DSN, an unknown driver).",
		"Correct the setting the message names; `sluice <command> --help` lists the accepted values.")
	LiteralSecret = register("SLUICE-E-CONFIG-LITERAL-SECRET", ExitUsage,
		"A DSN handed to the starter carries a literal password, which would be stored in plain text in Temporal's history.",
		"Remove the password from the DSN and pass a reference instead: --source-password-env VAR / --target-password-env VAR (read by the worker), --*-password-file PATH, or PGPASSWORD / a .pgpass file in the worker's environment.")
	SecretUnresolved = register("SLUICE-E-SECRET-UNRESOLVED", ExitUsage,
		"The worker could not resolve a secret reference (the environment variable is unset or the file is unreadable).",
		"Set the named environment variable, or make the named file readable, in the worker's environment, then run again.")
)

// Reachability (exit 1: transient, retried before it surfaces).
var (
	StoreUnreachable = register("SLUICE-E-STORE-UNREACHABLE", ExitRuntime,
		"The backup store did not answer or refused the request after retries.",
		"Check the store URL, --backup-endpoint, network reachability and credentials (the standard AWS chain for s3://), then run again.")
	SourceUnreachable = register("SLUICE-E-SOURCE-UNREACHABLE", ExitRuntime,
		"The source database could not be reached or refused the connection.",
		"Check the source DSN, that the database is up, and that the worker's host can reach it.")
	TargetUnreachable = register("SLUICE-E-TARGET-UNREACHABLE", ExitRuntime,
		"The target database could not be reached or refused the connection.",
		"Check the target DSN, that the database is up, and that the worker's host can reach it.")
	DBTLSRefused = register("SLUICE-E-DB-TLS-REFUSED", ExitRefused,
		"The DSN asks for TLS (sslmode=require, verify-ca or verify-full) and the database did not offer it, or its certificate did not verify. sluice never falls back to plaintext.",
		"Enable ssl on the database server, or point sslrootcert at the CA that signed its certificate (and use its name in the host for verify-full). To accept plaintext knowingly, set sslmode=disable in the DSN.")
	TemporalUnreachable = register("SLUICE-E-TEMPORAL-UNREACHABLE", ExitRuntime,
		"The starter could not reach the Temporal server.",
		"Start the services (`make services`) or point --temporal-address / TEMPORAL_ADDRESS at a running Temporal frontend.")
)

// Chain integrity (exit 3: sluice refuses to use damaged or inconsistent data).
var (
	ChunkCorrupt = register("SLUICE-E-CHUNK-CORRUPT", ExitRefused,
		"A chunk's bytes do not match the SHA-256 its manifest records, or the chunk does not decode.",
		"The chunk named in the message is damaged in the store. Restore it from a copy of the store if you have one; otherwise take a new full backup into a new chain.")
	ManifestInvalid = register("SLUICE-E-MANIFEST-INVALID", ExitRefused,
		"A manifest is missing, does not parse, or its content does not hash to its ID.",
		"The store holds a damaged or hand-edited manifest; take a new full backup into a new chain, or restore the store from a copy.")
	ChainInvalid = register("SLUICE-E-CHAIN-INVALID", ExitRefused,
		"The catalog does not validate: a link's parent, positions or ID do not agree with its neighbours.",
		"The chain cannot be replayed safely. Take a new full backup into a new chain; keep the damaged one for diagnosis.")
	ChainNotFound = register("SLUICE-E-CHAIN-NOT-FOUND", ExitRefused,
		"There is no chain at the given store URL (no catalog).",
		"Check the URL; create the chain with `sluice backup full` first.")
	LinkNotFound = register("SLUICE-E-LINK-NOT-FOUND", ExitRefused,
		"The chain has no link with the ID given (--through, --at-chain-id, --link).",
		"List the chain's links with `sluice backup list --target URL` and pass an ID it names (backup inspect also takes a unique prefix of at least 6 characters).")
	ChainExists = register("SLUICE-E-CHAIN-EXISTS", ExitRefused,
		"A full backup was asked for at a store URL that already holds a chain.",
		"Use a new --target prefix for a new chain. An existing chain gains new segments only through its producer's rotation (`sluice backup stream run`).")
	CatalogConflict = register("SLUICE-E-CATALOG-CONFLICT", ExitRefused,
		"Another writer committed to the chain's catalog first; this attempt's work was not committed.",
		"Make sure only one producer writes to this chain. Nothing this attempt wrote is named by the catalog; it is safe to run again once the other writer is gone.")
	FormatUnsupported = register("SLUICE-E-FORMAT-UNSUPPORTED", ExitRefused,
		"The chain, manifest or chunk was written in a format version this sluice does not read.",
		"Upgrade sluice to a version that reads the format named in the message.")
)

// Source refusals (exit 3).
var (
	SourcePrivileges = register("SLUICE-E-SOURCE-PRIVILEGES", ExitRefused,
		"The source role lacks a privilege the backup needs (SELECT on a table, REPLICATION).",
		"Grant the privilege the message names to the source role (e.g. GRANT SELECT ON ALL TABLES IN SCHEMA public TO <role>; ALTER ROLE <role> REPLICATION), then run again.")
	SlotUnconfirmed = register("SLUICE-E-SLOT-UNCONFIRMED", ExitRuntime,
		"The chain holds a window, but its end could not be confirmed to the source's replication slot, so the source keeps retaining its WAL.",
		"Nothing is lost: the next attempt confirms again. Check the connection to the source and that the producer's role may still use the slot; watch sluice_slot_retained_bytes, since an unconfirmed slot ends in a full pg_wal volume.")
	SourceMismatch = register("SLUICE-E-SOURCE-MISMATCH", ExitRefused,
		"The source database is not the one the chain was taken from (another cluster system identifier or database).",
		"Point --source at the chain's source, or start a new chain for this database with `sluice backup full`.")
	SourceGTIDBehind = register("SLUICE-E-SOURCE-GTID-BEHIND", ExitRefused,
		"Following a failover (--follow-failover), the MySQL-family server's binlog does not hold the chain's GTID position: it has not executed (or not logged) every transaction the chain already holds, so reading it would leave a gap or a second history in the chain. Nothing was read.",
		"Point --source at the replica that applied the most of the old primary's binlog, or let this one catch up (SHOW SLAVE STATUS) before promoting it; a replica must run with log_slave_updates=ON so the transactions it applied are in its own binlog. If the server is not from the chain's replication topology, start a new chain with `sluice backup full`.")
	PublicationMissing = register("SLUICE-E-PUBLICATION-MISSING", ExitRefused,
		"The publication named with --publication does not exist on the source.",
		"Create it (CREATE PUBLICATION <name> FOR ALL TABLES, as a superuser) or omit --publication to use sluice's own.")
	SourceReplicaIdentity = register("SLUICE-E-SOURCE-REPLICA-IDENTITY", ExitRefused,
		"Tables the chain's publication publishes, or would publish once created, have no usable replica identity (no primary key, REPLICA IDENTITY NOTHING, or an identity index that is gone). PostgreSQL rejects every UPDATE and DELETE on such a published table, in the application too, so sluice creates neither the publication nor the slot.",
		"Give each table the message lists the identity it names (ALTER TABLE … REPLICA IDENTITY USING INDEX <a NOT NULL unique index>, or … FULL when the table has none), or let `sluice backup full --set-replica-identity auto` run those statements; then run again.")
	SlotExists = register("SLUICE-E-SLOT-EXISTS", ExitRefused,
		"The replication slot the chain would create already exists on the source.",
		"Another chain may own it. Name another slot with --slot-name, or drop the stale slot (SELECT pg_drop_replication_slot('<name>')) if you are sure nothing uses it.")
)

// Target refusals (exit 3).
var (
	TargetNotEmpty = register("SLUICE-E-TARGET-NOT-EMPTY", ExitRefused,
		"A table restore would write into already holds rows.",
		"Restore into an empty database, drop the tables named, or pass --replace-existing to drop and recreate them.")
	TargetPrivileges = register("SLUICE-E-TARGET-PRIVILEGES", ExitRefused,
		"The target role may not create or write a table the restore needs.",
		"Grant CREATE on the target schema and ownership of the tables to the target role, then run again.")
)

// Broker (sync from-backup) start modes and refusals.
var (
	BrokerNoPosition = register("SLUICE-E-BROKER-NO-POSITION", ExitRefused,
		"The target holds no position for this --stream-id, so the broker does not know where in the chain to begin.",
		"Choose one: --reset-target-data drops the target's tables, restores the chain through its tail and then tails it; --at-chain-id <ID> asserts the target already holds the chain through link <ID> (e.g. after your own `sluice restore`).")
	BrokerPositionForeign = register("SLUICE-E-BROKER-POSITION-FOREIGN", ExitRefused,
		"The target's sluice_cdc_state row for this stream was written by another writer (not a backup broker), with or without recovery flags.",
		"Use another --stream-id, or, if that writer is retired, delete its row from sluice_cdc_state yourself.")
	BrokerPositionCorrupt = register("SLUICE-E-BROKER-POSITION-CORRUPT", ExitRuntime,
		"The broker's own sluice_cdc_state row is damaged (it does not decode or its checksum does not match); nothing was applied.",
		"Run with --reset-target-data (discards the row and rebuilds the target from the chain), or, if you know which link the target holds, delete the stream's sluice_cdc_state row and run with --at-chain-id <that link>.")
	BrokerAtChainIDConflict = register("SLUICE-E-BROKER-AT-CHAIN-ID-CONFLICT", ExitRuntime,
		"--at-chain-id names another link than the one the stored position records as fully applied (or the broker is inside an incremental); nothing was applied.",
		"Drop --at-chain-id to resume from the stored position, or use --reset-target-data. If you restored the target to another link yourself, delete the stream's rows from sluice_cdc_state and sluice_cdc_apply_marks first.")
	BrokerChainMismatch = register("SLUICE-E-BROKER-CHAIN-MISMATCH", ExitRefused,
		"The stored position belongs to another chain than the one at --backup-target.",
		"Point --backup-target at the chain the stream was replaying, use another --stream-id, or rebuild with --reset-target-data.")
	BrokerColdStartPartial = register("SLUICE-E-BROKER-COLD-START-PARTIAL", ExitRuntime,
		"A --reset-target-data cold start was interrupted after its drop began: the target holds a partial restore and no position.",
		"Run again with --reset-target-data. Never start this target with --at-chain-id.")
	BrokerIncrementalPartial = register("SLUICE-E-BROKER-INCREMENTAL-PARTIAL", ExitRuntime,
		"The broker was cancelled while applying an incremental: part of it may be committed and the position is inside it.",
		"Run the same command again: it resumes at the first source transaction not durably applied, exactly once.")
	BrokerIncrementalRewritten = register("SLUICE-E-BROKER-INCREMENTAL-REWRITTEN", ExitRefused,
		"The incremental the broker's position is inside was rewritten between two runs (another link follows the last applied one, its chunk list differs, or it holds fewer records than the position counted).",
		"The skip would be counted over a different stream of changes. Rebuild the target with --reset-target-data.")
	BrokerKeylessTable = register("SLUICE-E-BROKER-KEYLESS-TABLE", ExitRefused,
		"A table the next incremental touches has no key the replayed rows carry, and its replay cannot be made exactly-once (the message names the failed judgment and the reason).",
		"Follow the remedy for the reason given: restore with --reset-target-data (incremental without identities), put a key on the source and take a new full (a change without identity), make sluice_cdc_apply_marks usable, or give the target table the source's key instead of a surrogate.")
	BrokerFenced = register("SLUICE-E-BROKER-FENCED", ExitRuntime,
		"Another run of the same stream took over the position row; this run's transaction was rolled back.",
		"Nothing to do if the other run is the one you want; otherwise stop it. Two appliers never both advance a stream.")
	ApplyMarksUnavailable = register("SLUICE-E-APPLY-MARKS-UNAVAILABLE", ExitRefused,
		"The target role may not create or write sluice_cdc_state / sluice_cdc_apply_marks, so the replay cannot be made exactly-once.",
		"Grant the target role CREATE on the public schema (or create both tables as their owner and grant it INSERT, UPDATE, DELETE, SELECT).")
	ResetNotConfirmed = register("SLUICE-E-RESET-NOT-CONFIRMED", ExitUsage,
		"--reset-target-data drops the target's tables and was not confirmed.",
		"Type reset at the prompt, or pass --yes when no one can answer it (scripts, CI).")
)

// Workflow-level outcomes.
var (
	AlreadyRunning = register("SLUICE-E-ALREADY-RUNNING", ExitRefused,
		"A workflow with the same ID is already running, so Temporal refused a second one.",
		"Follow or stop the running one (the message names its workflow ID); start a second only after it ended.")
	NotRunning = register("SLUICE-E-NOT-RUNNING", ExitRefused,
		"No workflow of that name is running, so there is nothing to query, stop, pause, resume or tune.",
		"Check the --target / --stream-id; `temporal workflow list` shows what runs.")
	Canceled = register("SLUICE-E-CANCELED", ExitRuntime,
		"The run was cancelled before it finished; what it had written is not committed.",
		"Run the command again; a cancelled backup leaves nothing the catalog names, a cancelled restore leaves partly loaded tables that the next run with --replace-existing rebuilds.")
	Internal = register("SLUICE-E-INTERNAL", ExitRuntime,
		"An unexpected failure without a more specific code.",
		"Read the message and the worker log; run again. Report it with the message if it repeats.")
)

// Severed transactions found in a chain (exit 3; see docs/chain-format.md §6.4).
var (
	ChainSeveredTransaction = register("SLUICE-E-BACKUP-CHAIN-SEVERED-TRANSACTION", ExitRefused,
		"One source transaction is cut across two incrementals of the chain (a window ended or began inside it), or an incremental delivers again the transaction the one before it ended with; replaying it would apply part of a transaction, or one transaction twice.",
		"There is no override. Take a new full backup into a new chain (`sluice backup full --chain-slot` at a new --target) and replay from that; keep the damaged chain for diagnosis. `sluice backup verify-chain` lists every finding.")
	BackupIncomplete = register("SLUICE-E-BACKUP-INCOMPLETE", ExitRefused,
		"An incremental's end position is not where the last transaction it stores ends (or, when it stores none, not its start position): changes inside its window are missing from the chain.",
		"There is no override. Take a new full backup into a new chain (`sluice backup full --chain-slot` at a new --target) and replay from that; keep the damaged chain for diagnosis. `sluice backup verify-chain` lists every finding.")
)

// The configuration file (--config, SLUICE_CONFIG; exit 2; see docs/configuration.md).
var (
	ConfigFileUnreadable = register("SLUICE-E-CONFIG-FILE-UNREADABLE", ExitUsage,
		"The configuration file named by --config or SLUICE_CONFIG could not be read.",
		"Check the path and its permissions, or drop --config / unset SLUICE_CONFIG to run on flags alone.")
	ConfigFileMalformed = register("SLUICE-E-CONFIG-FILE-MALFORMED", ExitUsage,
		"The configuration file is not valid TOML; the message gives the line and column where reading stopped.",
		"Correct the file at the line and column named; `sluice validate-config --config PATH` checks it without starting anything.")
	ConfigUnknownKey = register("SLUICE-E-CONFIG-UNKNOWN-KEY", ExitUsage,
		"The configuration file holds keys sluice does not know (a typo, or a key under the wrong table); the message lists each one by its full path.",
		"Rename or remove every key listed. sluice refuses rather than ignores them, because an ignored setting silently falls back to its default. docs/configuration.md lists every key.")
	ConfigFileLiteralSecret = register("SLUICE-E-CONFIG-FILE-LITERAL-SECRET", ExitUsage,
		"The configuration file holds a password in clear (a password value, or a password inside a dsn); the message names its path.",
		"Delete the password from the file and reference it instead: password = { env = \"VAR\" } (an environment variable of the worker) or password = { file = \"/path\" } (a file on the worker's host). Rotate the password if the file was shared.")
	ConfigFileInvalid = register("SLUICE-E-CONFIG-FILE-INVALID", ExitUsage,
		"A key of the configuration file has a value of the wrong type or an unusable value; the message names its path.",
		"Correct the values named; docs/configuration.md gives the type of every key.")
	ConfigSiteUnknown = register("SLUICE-E-CONFIG-SITE-UNKNOWN", ExitUsage,
		"A --site NAME (or SLUICE_SITE) names a site the configuration file does not define, or no configuration file is loaded.",
		"Define [sites.NAME] (namespace, task_queue, roles) in the file given by --config or SLUICE_CONFIG, or give --namespace and --task-queue instead of --site.")
	ConfigConnectionUnknown = register("SLUICE-E-CONFIG-CONNECTION-UNKNOWN", ExitUsage,
		"A --source @NAME or --target @NAME names a connection the configuration file does not define, or no configuration file is loaded.",
		"Define [sources.NAME] or [targets.NAME] in the file given by --config or SLUICE_CONFIG, or pass the DSN itself.")
)

// Worker admin endpoint (exit 2: the worker refuses to start).
var (
	AdminUnprotected = register("SLUICE-E-ADMIN-UNPROTECTED", ExitUsage,
		"The worker's admin endpoint was asked to listen on a non-loopback address without a bearer token, without TLS, or without both, which would expose /metrics to the network in the clear.",
		"Keep --admin-addr on 127.0.0.1 (the default), or give a token reference (--admin-token-env VAR or --admin-token-file PATH) and a certificate (--admin-tls-cert and --admin-tls-key). The message names what is missing.")
	AdminTokenWeak = register("SLUICE-E-ADMIN-TOKEN-WEAK", ExitUsage,
		"The admin bearer token the worker resolved is shorter than 16 characters.",
		"Generate a longer token (e.g. `openssl rand -hex 32`) and store it in the referenced environment variable or file.")
)

// Temporal transport and payload encryption (see docs/operations.md, "Temporal
// TLS, API key and payload encryption").
var (
	TemporalTLSInvalid = register("SLUICE-E-TEMPORAL-TLS-INVALID", ExitUsage,
		"The Temporal client TLS options cannot be used: a client certificate without its key (or the reverse), or a CA, certificate or key file that cannot be read or does not parse; the message names the flag.",
		"Give --temporal-tls-cert and --temporal-tls-key together, each a readable PEM file (and --temporal-tls-ca a readable PEM bundle), or drop both for server-only TLS.")
	TemporalAPIKeyUnresolved = register("SLUICE-E-TEMPORAL-API-KEY-UNRESOLVED", ExitUsage,
		"--temporal-api-key-env names an environment variable that is unset or empty in this process.",
		"Export the API key in the variable named (the flag holds the variable's name, never the key), or drop --temporal-api-key-env.")
	PayloadKeyInvalid = register("SLUICE-E-PAYLOAD-KEY-INVALID", ExitUsage,
		"--payload-key-env names an environment variable that is unset, empty, not base64, or not a 32-byte key.",
		"Put a base64 32-byte key in the variable named (e.g. `openssl rand -base64 32`), the same one for the starter, every worker and the codec server.")
	PayloadUndecryptable = register("SLUICE-E-PAYLOAD-UNDECRYPTABLE", ExitRuntime,
		"An encrypted workflow payload could not be decrypted: it was written with a different key (the message names both key IDs), or it was altered.",
		"Give this process the key the writer used (--payload-key-env); the key ID in the message is a fingerprint of that key, never the key itself. `sluice codec-server` prints the ID of the key it holds.")
	CodecServerRemote = register("SLUICE-E-CODEC-SERVER-REMOTE", ExitUsage,
		"`sluice codec-server --listen` names a non-loopback address without --allow-remote; anyone who can reach it could decrypt every payload of the namespace.",
		"Keep --listen on 127.0.0.1 and reach it through an SSH tunnel or a proxy that authenticates operators, or pass --allow-remote once such a proxy stands in front of it.")
)

// Chain maintenance: retention (exit 3; see docs/runbook.md, "Retention").
var (
	PruneBrokerBehind = register("SLUICE-E-PRUNE-BROKER-BEHIND", ExitRefused,
		"The prune would drop a segment a broker of the chain still has to replay: the position the broker last reported into the store lies in it, or before it. Nothing was pruned.",
		"Let the broker named catch up (`sluice sync from-backup status --stream-id …`), or keep more segments. --force prunes anyway, and that broker must then be rebuilt with --reset-target-data. For a broker you retired, delete its report (control/position-broker-<stream> in the store) and prune again.")
	BrokerPositionPruned = register("SLUICE-E-BROKER-POSITION-PRUNED", ExitRefused,
		"The broker's position names a link that retention has pruned from the chain, so incrementals it still needs are gone; nothing was applied.",
		"Rebuild the target with --reset-target-data: it restores the chain's newest segment and then tails it. Size retention so that every broker stays inside it (docs/runbook.md, \"Retention\").")
)

// Verification of a target against its source (`sluice verify`; see
// docs/runbook.md, "Verify a replica").
var (
	VerifyMismatch = register("SLUICE-E-VERIFY-MISMATCH", ExitRuntime,
		"The source and the target differ: at least one compared table is missing on the target, holds another number of rows, or (at checksum depth) other rows. The output names each table and how it differs.",
		"A source being written moves between the two snapshots: stop its writes, or stop the producer and compare with --wait-broker STREAM --backup-target URL, then verify again. A difference that stays is real: rebuild the target (sync from-backup run --reset-target-data, or restore), and keep the output for diagnosis.")
	VerifyColumnsDiffer = register("SLUICE-E-VERIFY-COLUMNS-DIFFER", ExitRuntime,
		"A compared table's columns differ between the source and the target: the target lacks a column the source stores, or stores one the source has not (generated columns are not compared). The output names each such table and its missing and extra columns; its rows were counted but not compared.",
		"A column the source added or dropped reaches the target as a schema change: if a broker replays the chain, let it catch up (--wait-broker) and verify again. A difference that stays means the target's table was altered by hand or missed a schema change: rebuild it (sync from-backup run --reset-target-data, or restore), or alter it to the source's columns, then verify again.")
	VerifyBrokerBehind = register("SLUICE-E-VERIFY-BROKER-BEHIND", ExitRefused,
		"--wait-broker: the broker had not applied the chain's tip within --wait-timeout, or the target holds no position for that stream in that chain, so nothing was compared.",
		"Check that the broker runs and catches up (`sluice sync from-backup status --stream-id …`) and that --wait-broker and --backup-target name its stream and chain; raise --wait-timeout for a broker far behind, then verify again.")
	VerifyUnsupported = register("SLUICE-E-VERIFY-UNSUPPORTED", ExitRefused,
		"The source or the target engine cannot read its tables back in a snapshot, so sluice verify cannot compare it.",
		"Compare with an engine that can: the postgres source, and postgres, mysql or sqlite targets.")
)
