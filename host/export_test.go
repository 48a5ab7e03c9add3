package host

// TakeTurns is takeTurns, for the benchmarks of package host_test.
var TakeTurns = takeTurns
