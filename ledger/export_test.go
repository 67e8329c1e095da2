package ledger

// Queued returns how many single writes wait for a group (tests build
// groups of known members with it).
func (s *Store) Queued() int {
	s.group.mu.Lock()
	defer s.group.mu.Unlock()
	return len(s.group.queue)
}
