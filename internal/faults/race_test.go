//go:build race

package faults_test

const raceNote = "-race"
