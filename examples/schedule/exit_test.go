package main

// The race detector's pause at exit (a second per test binary) is not needed
// here; see testexit.
import _ "github.com/corotask/corotask/internal/testexit"
