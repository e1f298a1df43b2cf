package mysql

import (
	"context"
	"testing"
)

// A target that still has the table restores once recorded their
// incrementals in loses it when the control tables are ensured.
func TestLegacyRestoreLinksTableDropped(t *testing.T) {
	tg := openTarget(t)
	exec(t, tg, `CREATE TABLE sluice_restore_links (chain_id VARCHAR(255) NOT NULL, link_id VARCHAR(255) NOT NULL,
		applied_through BIGINT NOT NULL DEFAULT 0, done TINYINT(1) NOT NULL DEFAULT 0, applied_at DATETIME(6) NOT NULL, PRIMARY KEY (chain_id, link_id))`,
		`INSERT INTO sluice_restore_links (chain_id, link_id, applied_at) VALUES ('c', 'i-1', NOW(6))`)
	if err := tg.State().EnsureControlTables(context.Background()); err != nil {
		t.Fatal(err)
	}
	wantRows(t, tg.db, `SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'sluice_restore_links'`, "0")
}
