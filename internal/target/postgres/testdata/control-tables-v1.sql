-- Frozen: the broker's control tables as the first release created them,
-- with a position and marks of stream "s". Read by TestControlTablesV1.
-- Never edit; a new layout gets a new file.
CREATE TABLE public.sluice_cdc_state (
	stream_id  text PRIMARY KEY,
	token      text NOT NULL,
	checksum   text NOT NULL,
	updated_at timestamptz NOT NULL DEFAULT now());
CREATE TABLE public.sluice_cdc_apply_marks (
	stream_id     text   NOT NULL,
	link_id       text   NOT NULL,
	xid           bigint NOT NULL,
	commit_lsn    bigint NOT NULL,
	first_ordinal int    NOT NULL,
	ranges        int[]  NOT NULL,
	PRIMARY KEY (stream_id, xid, commit_lsn, first_ordinal));
INSERT INTO public.sluice_cdc_state (stream_id, token, checksum) VALUES ('s',
	'{"_engine":"backup-broker-v2","stream":"s","chain_id":"c1","last_applied":"l1","owner":"run-1","changes":12,"updated_at":"2026-05-01T10:00:00Z"}',
	'0b51301f79ca40cacf4e746dc0a5d8e0f63f561988facc87e89289faeded6781');
INSERT INTO public.sluice_cdc_apply_marks VALUES
	('s', 'l1', 7, 1099511627776, 0, '{0,2,5,6}'),
	('s', 'l1', 8, 1099511627900, 0, '{0,0}');
