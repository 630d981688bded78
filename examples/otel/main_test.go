package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/internal/testdb"
	"github.com/corotask/corotask/tasks"
)

type keyValue struct {
	Key   string
	Value struct{ Value any }
}

// exported is one JSON object the stdout exporters wrote: a span, or the
// metrics.
type exported struct {
	// A span.
	Name        string
	SpanContext spanContext
	Links       []struct{ SpanContext spanContext }
	Attributes  []keyValue
	Status      struct{ Code string }
	// The metrics.
	ScopeMetrics []struct {
		Metrics []struct {
			Name string
			Data struct {
				DataPoints []struct {
					Attributes []keyValue
					Value      float64
					Count      uint64
				}
			}
		}
	}
}

type spanContext struct{ TraceID, SpanID string }

func attr(kvs []keyValue, key string) any {
	for _, kv := range kvs {
		if kv.Key == key {
			return kv.Value.Value
		}
	}
	return nil
}

func TestOtel(t *testing.T) {
	t.Parallel()
	for _, pretty := range []bool{false, true} {
		t.Run("", func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			url := testdb.URL(t)
			db := testdb.Pool(t, url)
			var out bytes.Buffer
			require.NoError(t, run(ctx, config{DatabaseURL: url, Items: 4, Pretty: pretty, Logger: testdb.Logger(t)}, &out))

			// JSON objects, then the outcome on the last line.
			text := out.Bytes()
			last := bytes.LastIndexByte(text[:len(text)-1], '\n') + 1
			m := regexp.MustCompile(`^checkout (\S+) done: 4 items, total 10\n$`).FindSubmatch(text[last:])
			require.NotNil(t, m, string(text[last:]))
			dec := json.NewDecoder(bytes.NewReader(text[:last]))
			var objs []exported
			for {
				var o exported
				err := dec.Decode(&o)
				if errors.Is(err, io.EOF) {
					break
				}
				require.NoError(t, err)
				objs = append(objs, o)
			}
			id, err := tasks.ParseID(string(m[1]))
			require.NoError(t, err)
			task, err := tasks.Get(ctx, db, id)
			require.NoError(t, err)
			require.Equal(t, tasks.StatusDone, task.Status)

			// Spans: the checkout's three polls (spawn, fan in as the items
			// end), the items' four successful polls and one failure.
			spans := map[string]int{}
			var failed []exported
			var metrics *exported
			for i, o := range objs {
				switch {
				case o.ScopeMetrics != nil:
					metrics = &objs[i]
				case o.Status.Code == "Error":
					failed = append(failed, o)
				default:
					spans[o.Name]++
				}
			}
			require.Equal(t, 1, spans["checkout request"])
			require.Equal(t, 4, spans["corotask.poll otel.item"])
			require.GreaterOrEqual(t, spans["corotask.poll otel.checkout"], 2)
			require.Len(t, failed, 1)
			require.Equal(t, "corotask.poll otel.item", failed[0].Name)
			require.Equal(t, "failed", attr(failed[0].Attributes, "corotask.poll.outcome"))

			// Links: each poll of the checkout to the request that created
			// it, each poll of an item to the checkout's poll that spawned it.
			var request spanContext
			checkoutPolls := map[spanContext]bool{}
			for _, o := range objs {
				switch o.Name {
				case "checkout request":
					request = o.SpanContext
				case "corotask.poll otel.checkout":
					checkoutPolls[o.SpanContext] = true
				}
			}
			spawner := map[spanContext]bool{}
			for _, o := range objs {
				switch o.Name {
				case "corotask.poll otel.checkout":
					require.Len(t, o.Links, 1)
					require.Equal(t, request, o.Links[0].SpanContext)
					require.NotEqual(t, request.TraceID, o.SpanContext.TraceID)
				case "corotask.poll otel.item":
					require.Len(t, o.Links, 1)
					require.True(t, checkoutPolls[o.Links[0].SpanContext], "an item links to a poll of the checkout")
					spawner[o.Links[0].SpanContext] = true
				}
			}
			require.Len(t, spawner, 1, "one poll spawned every item")

			require.NotNil(t, metrics, "the metrics were exported")
			values := map[string]float64{}
			for _, sm := range metrics.ScopeMetrics {
				for _, mt := range sm.Metrics {
					for _, dp := range mt.Data.DataPoints {
						k := mt.Name
						for _, a := range []string{"task.type", "outcome"} {
							if v := attr(dp.Attributes, a); v != nil {
								k += " " + v.(string)
							}
						}
						values[k] += dp.Value + float64(dp.Count)
					}
				}
			}
			require.Equal(t, 4.0, values["corotask.polls otel.item committed"])
			require.Equal(t, 1.0, values["corotask.polls otel.item failed"])
			require.Equal(t, 4.0, values["corotask.tasks.created otel.checkout"])
			require.Equal(t, 5.0, values["corotask.poll.duration otel.item committed"]+values["corotask.poll.duration otel.item failed"])
			require.Contains(t, values, "corotask.tasks.ready otel.item")
			require.Contains(t, values, "corotask.claim.duration ok")
		})
	}
}

func TestBadItems(t *testing.T) {
	t.Parallel()
	err := run(context.Background(), config{Items: 0}, &bytes.Buffer{})
	require.EqualError(t, err, "-items 0: want at least one item")
}
