// Package errcode defines every SLUICE-E-… code: its exit status, its meaning
// and the hint that tells an operator what to do. Errors carrying a code travel
// through Temporal as non-retryable application errors whose type is the code.
package errcode

import (
	"errors"
	"fmt"
	"sort"
)

// Exit statuses of the sluice commands.
const (
	// ExitOK means done, or stopped on request.
	ExitOK = 0
	// ExitRuntime means a runtime failure or partial work.
	ExitRuntime = 1
	// ExitUsage means bad configuration or usage.
	ExitUsage = 2
	// ExitRefused means a named refusal: sluice declined to do something unsafe.
	ExitRefused = 3
)

// Code is a stable error code such as "SLUICE-E-CHUNK-CORRUPT".
type Code string

// Spec is what the project promises about a code.
type Spec struct {
	// Code is the stable identifier.
	Code Code
	// Exit is the exit status the sluice CLI ends with.
	Exit int
	// Meaning says in one sentence what happened.
	Meaning string
	// Hint tells the operator what to do.
	Hint string
}

var registry = map[Code]Spec{}

func register(code Code, exit int, meaning, hint string) Code {
	if _, dup := registry[code]; dup {
		panic("errcode: duplicate code " + string(code))
	}
	registry[code] = Spec{Code: code, Exit: exit, Meaning: meaning, Hint: hint}
	return code
}

// Lookup returns the spec of a code.
func Lookup(c Code) (Spec, bool) {
	s, ok := registry[c]
	return s, ok
}

// All returns every registered code's spec, sorted by code.
func All() []Spec {
	out := make([]Spec, 0, len(registry))
	for _, s := range registry {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Code < out[j].Code })
	return out
}

// Error is an error that carries a code. Message says what went wrong in this
// instance; the hint comes from the code's spec unless Hint overrides it.
type Error struct {
	Code    Code
	Message string
	// Hint, when set, replaces the code's default hint for this instance.
	Hint string
	Err  error
}

// Error renders "CODE: message: cause".
func (e *Error) Error() string {
	s := string(e.Code) + ": " + e.Message
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// HintText returns the hint for this instance.
func (e *Error) HintText() string {
	if e.Hint != "" {
		return e.Hint
	}
	return registry[e.Code].Hint
}

// Exit returns the exit status for this error's code.
func (e *Error) Exit() int {
	if s, ok := registry[e.Code]; ok {
		return s.Exit
	}
	return ExitRuntime
}

// New returns a coded error with a formatted message.
func New(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Wrap returns a coded error with a formatted message and a cause.
func Wrap(code Code, err error, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...), Err: err}
}

// As returns the outermost coded error in err's chain.
func As(err error) (*Error, bool) {
	var e *Error
	if errors.As(err, &e) {
		return e, true
	}
	return nil, false
}

// Is reports whether err carries code anywhere in its chain.
func Is(err error, code Code) bool {
	for err != nil {
		var e *Error
		if !errors.As(err, &e) {
			return false
		}
		if e.Code == code {
			return true
		}
		err = e.Err
	}
	return false
}

// ExitStatus maps an error to the CLI's exit status: 0 for nil, the code's
// status for a coded error, 1 otherwise.
func ExitStatus(err error) int {
	if err == nil {
		return ExitOK
	}
	if e, ok := As(err); ok {
		return e.Exit()
	}
	return ExitRuntime
}
