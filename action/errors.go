package action

import "errors"

// joinErrors joins validation errors; Errors unpacks them again.
func joinErrors(errs []error) error { return errors.Join(errs...) }

// Errors returns the individual errors of a joined validation error (or err itself).
func Errors(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	if err == nil {
		return nil
	}
	return []error{err}
}
