package chain

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"

	"github.com/sluicehq/sluice/internal/errcode"
)

// encodeManifest returns the stored form of a sealed manifest: its canonical
// encoding (the bytes its ID was computed over, with the ID filled in)
// followed by a newline.
func encodeManifest(m *Manifest) ([]byte, error) {
	b, err := canonicalManifest(m, m.ID)
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// decodeManifest parses the stored manifest that should have the given ID
// and checks its format version and its ID.
func decodeManifest(id string, data []byte) (*Manifest, error) {
	var m Manifest
	if err := strictUnmarshal(data, &m); err != nil {
		return nil, errcode.Wrap(errcode.ManifestInvalid, err, "manifest %s does not parse", id)
	}
	if m.FormatVersion < OldestFormatVersion || m.FormatVersion > ManifestFormatVersion {
		return nil, errcode.New(errcode.FormatUnsupported,
			"manifest %s has format version %d; this sluice reads versions %d to %d", id, m.FormatVersion, OldestFormatVersion, ManifestFormatVersion)
	}
	if m.ID != id {
		return nil, errcode.New(errcode.ManifestInvalid, "manifest stored as %s carries ID %s", id, m.ID)
	}
	if err := VerifyID(&m); err != nil {
		return nil, err
	}
	return &m, nil
}

// strictUnmarshal decodes one JSON value into v, refusing unknown fields and
// trailing data: a field this version does not know would escape the ID.
func strictUnmarshal(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("trailing data after the JSON value")
	}
	return nil
}

// LinkFromManifest returns the catalog link describing m. m should be sealed.
func LinkFromManifest(m *Manifest) Link {
	return Link{
		ID:            m.ID,
		Kind:          m.Kind,
		Parent:        m.Parent,
		StartPosition: m.StartPosition,
		EndPosition:   m.EndPosition,
		CreatedAt:     NormalizeTime(m.CreatedAt),
		Rows:          m.Rows,
		Changes:       m.Changes,
		Transactions:  m.Transactions,
	}
}

// AllChunks returns every chunk the manifest names: a full's row chunks,
// table by table, then an incremental's change chunks.
func (m *Manifest) AllChunks() []ChunkRef {
	var out []ChunkRef
	for _, t := range m.Tables {
		out = append(out, t.Chunks...)
	}
	return append(out, m.Chunks...)
}
