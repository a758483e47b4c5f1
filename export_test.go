package pgrelay

// Sentinels lists every sentinel of a PR code, for the tests.
var Sentinels = sentinels

// SentinelCode is the SQLSTATE of a sentinel.
func SentinelCode(err error) string { return err.(*codeError).code }
