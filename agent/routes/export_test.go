package routes

// SkipsForTest reports whether s's skipIf holds for d.
func SkipsForTest(s *Step, d Data) bool {
	skip, err := s.skip(d)
	return err == nil && skip
}
