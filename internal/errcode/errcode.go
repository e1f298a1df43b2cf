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

// aliases maps each code of an earlier release to the concept code that
// replaced it.
var aliases = map[Code]Code{}

// alias registers old, a code earlier releases raised, as another name of
// concept, and returns old. An error of concept that one engine raised
// under old says so (Error.Formerly), and Is finds it by either code.
func alias(old, concept Code) Code {
	if _, dup := registry[old]; dup {
		panic("errcode: alias " + string(old) + " is a code")
	}
	if _, ok := registry[concept]; !ok {
		panic("errcode: alias " + string(old) + " of unknown code " + string(concept))
	}
	aliases[old] = concept
	return old
}

// Alias is a code of an earlier release and the code that replaced it.
type Alias struct {
	// Old is the earlier code, still printed beside the new one by the
	// engine that raised it.
	Old Code
	// Concept is the code raised now.
	Concept Code
}

// Aliases returns every alias, sorted by the earlier code.
func Aliases() []Alias {
	out := make([]Alias, 0, len(aliases))
	for old, c := range aliases {
		out = append(out, Alias{Old: old, Concept: c})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Old < out[j].Old })
	return out
}

// canonical is the code c stands for: its concept code when c is an alias.
func canonical(c Code) Code {
	if to, ok := aliases[c]; ok {
		return to
	}
	return c
}

func register(code Code, exit int, meaning, hint string) Code {
	if _, dup := registry[code]; dup {
		panic("errcode: duplicate code " + string(code))
	}
	registry[code] = Spec{Code: code, Exit: exit, Meaning: meaning, Hint: hint}
	return code
}

// Lookup returns the spec of a code; for an alias, its concept code's.
func Lookup(c Code) (Spec, bool) {
	s, ok := registry[canonical(c)]
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
	// Formerly, when set, is the code earlier releases raised for this
	// refusal (an alias of Code), printed beside it so a script matching
	// the old code still matches.
	Formerly Code
	Err      error
}

// Error renders "CODE: message: cause", or "CODE (formerly OLD): …".
func (e *Error) Error() string {
	s := string(e.Code)
	if e.Formerly != "" {
		s += " (formerly " + string(e.Formerly) + ")"
	}
	s += ": " + e.Message
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
	return registry[canonical(e.Code)].Hint
}

// Exit returns the exit status for this error's code.
func (e *Error) Exit() int {
	if s, ok := registry[canonical(e.Code)]; ok {
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

// Was returns e, noting old as the code earlier releases raised for it.
func (e *Error) Was(old Code) *Error {
	e.Formerly = old
	return e
}

// Is reports whether err carries code anywhere in its chain; an alias and
// its concept code are the same code.
func Is(err error, code Code) bool {
	code = canonical(code)
	for err != nil {
		var e *Error
		if !errors.As(err, &e) {
			return false
		}
		if canonical(e.Code) == code {
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
