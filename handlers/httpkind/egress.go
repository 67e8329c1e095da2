package httpkind

import "github.com/actionsledger/actionsledger/internal/egress"

// Egress decides where the kind may send turns (package egress, issue 11).
type Egress = egress.Egress

// ErrEgress marks a destination the server's egress rules refuse.
var ErrEgress = egress.ErrRefused

// ParseEgress returns egress rules (see egress.Parse).
func ParseEgress(allow []string) (*Egress, error) { return egress.Parse(allow) }

// AllowAll returns rules that allow every destination (tests that run
// receivers on loopback).
func AllowAll() *Egress { return egress.AllowAll() }
