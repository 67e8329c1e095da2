package server

// Document shapes for the external tests (see limits_internal_test.go).
var (
	FragmentBomb        = fragmentBomb
	SameNameFields      = sameNameFields
	SideBySideFragments = sideBySideFragments
	NestedSameName      = nestedSameName
)
