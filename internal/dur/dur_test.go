package dur

import (
	"encoding/json"
	"testing"
	"time"
)

func TestJSONIsTheDurationString(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{2 * time.Second, `"2s"`},
		{5 * time.Minute, `"5m0s"`},
		{0, `"0s"`},
		{1500 * time.Millisecond, `"1.5s"`},
	} {
		b, err := json.Marshal(Duration(tc.d))
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != tc.want {
			t.Errorf("%s encodes as %s, want %s", tc.d, b, tc.want)
		}
		var back Duration
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		if back.D() != tc.d {
			t.Errorf("%s round-trips to %s", tc.d, back)
		}
	}
}

func TestDecodesNanosecondsAsRecordedBefore(t *testing.T) {
	var in struct {
		Rollover Duration `json:"rollover"`
		Idle     Duration `json:"idle,omitempty"`
		Missing  Duration `json:"missing"`
		Null     Duration `json:"null"`
	}
	in.Null = Duration(time.Hour)
	if err := json.Unmarshal([]byte(`{"rollover":2000000000,"idle":3e11,"null":null}`), &in); err != nil {
		t.Fatal(err)
	}
	if in.Rollover.D() != 2*time.Second || in.Idle.D() != 5*time.Minute || in.Missing != 0 || in.Null.D() != time.Hour {
		t.Fatalf("decoded %+v", in)
	}
}

func TestRefusesWhatIsNoDuration(t *testing.T) {
	for _, bad := range []string{`"2 seconds"`, `true`, `{}`, `"1e3"`} {
		var d Duration
		if err := json.Unmarshal([]byte(bad), &d); err == nil {
			t.Errorf("%s decoded as %s", bad, d)
		}
	}
}
