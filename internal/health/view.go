package health

// StatusView is a Status as the worker's /status endpoint shows it: the same
// fields, with the thresholds in seconds under keys that say so. Status
// itself keeps its encoding; this is presentation only.
type StatusView struct {
	Status
	// Thresholds replaces Status.Thresholds in the JSON (the outer field wins).
	Thresholds ThresholdsView `json:"thresholds"`
}

// ThresholdsView is Thresholds in seconds.
type ThresholdsView struct {
	PollStallSeconds     float64 `json:"poll_stall_seconds"`
	DeliveryStallSeconds float64 `json:"delivery_stall_seconds"`
	NotRunningSeconds    float64 `json:"not_running_seconds"`
}

// View returns the thresholds in seconds.
func (t Thresholds) View() ThresholdsView {
	return ThresholdsView{
		PollStallSeconds:     t.PollStall.Seconds(),
		DeliveryStallSeconds: t.DeliveryStall.Seconds(),
		NotRunningSeconds:    t.NotRunning.Seconds(),
	}
}

// View returns the status as /status shows it.
func (s Status) View() StatusView {
	return StatusView{Status: s, Thresholds: s.Thresholds.View()}
}

// Views returns the statuses as /status shows them; never nil, so an empty
// list encodes as [].
func Views(runs []Status) []StatusView {
	out := make([]StatusView, 0, len(runs))
	for _, s := range runs {
		out = append(out, s.View())
	}
	return out
}
