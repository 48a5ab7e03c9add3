package host

// TakeTurns is takeTurns, for the benchmarks of package host_test.
var TakeTurns = takeTurns

// CPUTime is cpuTime, for the benchmarks of package host_test.
var CPUTime = cpuTime
