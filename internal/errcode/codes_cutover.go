package errcode

// Codes of `sluice sync from-backup cutover`: switching an application to
// a broker's target.
var (
	// CutoverProducerRunning is a cutover asked while the chain's producer
	// still runs and no stop of it is pending.
	CutoverProducerRunning = register("SLUICE-E-CUTOVER-PRODUCER-RUNNING", ExitRefused,
		"The chain's producer is still running, so the chain's tip is not the source's last write: a target cut over now would miss what the source commits next, and its sequences could fall behind the source's. Nothing was stopped or changed.",
		"Stop the application's writes to the source, then stop the producer (`sluice backup stream stop --target URL`: it commits the window it holds and ends) and cut over again; the cutover waits within --wait for a producer whose stop is pending. If the source is quiesced by other means and the producer must keep running, pass --force.")
	// CutoverTimeout is a cutover whose broker did not reach the chain's
	// tip, or a producer or broker that did not end, within --wait.
	CutoverTimeout = register("SLUICE-E-CUTOVER-TIMEOUT", ExitRuntime,
		"The cutover waited --wait for the producer to end, for the broker to apply the chain's tip or for the broker to end after its stop, and it did not happen in time. Sequences were not moved; whatever was already stopped stays stopped.",
		"`sluice sync from-backup status --stream-id S` shows where the broker stands (a broker far behind needs longer; a failing one says why); run the cutover again, with a longer --wait if needed. It is safe to repeat: a broker already stopped at the tip is not waited for again.")
	// CutoverBehind is a stream whose position in the target is short of
	// the chain's tip as the cutover began, with no broker running to
	// bring it there.
	CutoverBehind = register("SLUICE-E-CUTOVER-BEHIND", ExitRefused,
		"The target's position for this --stream-id does not hold the chain's tip as the cutover began (or the target holds no position for it), and no broker of the stream is running to apply the rest. Sequences were not moved.",
		"Start the broker again (`sluice sync from-backup run --stream-id S …`, the same flags as before) and cut over once it runs; the cutover waits for it to reach the tip. `sluice sync from-backup status --stream-id S` says why a broker ended.")
)
