//go:build !race

package faults_test

const raceNote = "no -race"
