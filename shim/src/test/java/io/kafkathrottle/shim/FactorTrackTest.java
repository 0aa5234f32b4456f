package io.kafkathrottle.shim;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;

import org.junit.jupiter.api.Test;

/**
 * The epoch rule and the factor Kafka's sensors are given, on Kafka's default window (11 samples
 * of 1 s: a young sensor divides by about 10.5 s, a steady one by about 11.5 s, and its bytes
 * reach back at most 12 s).
 */
class FactorTrackTest {
    private static final QuotaWindow WINDOW = QuotaWindow.KAFKA_DEFAULT;
    private static final long SECOND = 1_000_000_000L;
    private static final double EXACT = 1e-12;

    private static long at(double seconds) {
        return Math.round(seconds * SECOND);
    }

    private static FactorTrack track(double factor) {
        return FactorTrack.starting(factor, true);
    }

    @Test
    void aSteadyFactorGoesToKafkaAsItIs() {
        FactorTrack track = track(0.5);
        assertEquals(0.5, track.kafkaFactor(at(0), WINDOW));
        assertEquals(0.5, track.kafkaFactor(at(1000), WINDOW));
    }

    @Test
    void aFallReachesKafkaAsFastAsItsWindowForgetsTheBytesOfTheOldFactor() {
        FactorTrack track = track(1.0).next(0.9, at(100), WINDOW);
        assertEquals(0, track.epoch, "a small fall keeps the sensors");
        assertEquals(1.0, track.kafkaFactor(at(100), WINDOW), EXACT);
        assertEquals((0.9 * 1.15 + 1.0 * 10.35) / 11.5, track.kafkaFactor(at(101.15), WINDOW), EXACT);
        assertEquals((0.9 * 5.75 + 1.0 * 5.75) / 11.5, track.kafkaFactor(at(105.75), WINDOW), EXACT);
        assertEquals(0.9, track.kafkaFactor(at(111.5), WINDOW), EXACT, "one window on, only the new factor");
        assertEquals(0.9, track.kafkaFactor(at(500), WINDOW));
    }

    @Test
    void aRiseReachesKafkaAtOnceAndCountsForEveryMomentSinceEachFactorItOutranks() {
        FactorTrack rise = track(0.5).next(0.6, at(100), WINDOW);
        assertEquals(0.6, rise.kafkaFactor(at(100), WINDOW), EXACT);
        FactorTrack fallThenRise = track(1.0).next(0.85, at(100), WINDOW).next(0.9, at(105), WINDOW);
        // [93.5, 100] at 1.0; [100, 105] at 0.85, counted at the 0.9 in force since.
        assertEquals((1.0 * 6.5 + 0.9 * 5) / 11.5, fallThenRise.kafkaFactor(at(105), WINDOW), EXACT);
    }

    @Test
    void aPauseAlwaysStartsANewEpochAndKafkaGetsZero() {
        FactorTrack paused = track(0.95).next(0.0, at(100), WINDOW);
        assertEquals(1, paused.epoch);
        assertEquals(0.0, paused.kafkaFactor(at(100), WINDOW));
        assertEquals(1, paused.next(0.0, at(110), WINDOW).epoch, "a pause that goes on is the same epoch");
    }

    @Test
    void aFreshEpochIsGivenTheFactorTimesItsAgeOverWhatAYoungSensorDividesBy() {
        FactorTrack fresh = track(1.0).next(0.3, at(100), WINDOW);
        assertEquals(1, fresh.epoch, "0.3 is below 0.8 of the 1.0 Kafka held");
        // It counts as one tick (a quarter second) old.
        assertEquals(0.3 * 0.25 / 10.5, fresh.kafkaFactor(at(100), WINDOW), EXACT);
        assertEquals(0.3 * 2.35 / 10.5, fresh.kafkaFactor(at(102.1), WINDOW), EXACT);
        assertEquals(0.3, fresh.kafkaFactor(at(110.25), WINDOW), EXACT);

        FactorTrack afterPause = track(1.0).next(0.0, at(100), WINDOW).next(0.5, at(103), WINDOW);
        assertEquals(1, afterPause.epoch, "a rise never starts an epoch");
        assertEquals(0.5 * 3.25 / 10.5, afterPause.kafkaFactor(at(103), WINDOW), EXACT, "the pause's time counted at the 0.5 since");
    }

    @Test
    void inAFreshEpochTheFloorGrowsSoAYoungSensorsAllowanceGrowsAtTheFloorsRateUntilASpanHasPassed() {
        FactorTrack paused = track(1.0).next(0.0, at(100), WINDOW);
        // allowance = floor x growth x divisor = floor x (10.5 s + age), age counted from a tick before
        assertEquals(10.75 / 10.5, paused.floorGrowth(at(100), WINDOW), EXACT);
        assertEquals(15.75 / 10.5, paused.floorGrowth(at(105), WINDOW), EXACT);
        assertEquals(21.75 / 11.25, paused.floorGrowth(at(111), WINDOW), EXACT, "past 10.5 s a young sensor divides by its age");
        assertEquals(1.0, paused.floorGrowth(at(111.75), WINDOW), "a span old: the window slides, the first allowance is gone");
        assertEquals(1.0, track(0.5).floorGrowth(at(100), WINDOW), "the first epoch is no fresh start");
        assertEquals(1.0, FactorTrack.starting(1.0, false).next(0.0, at(100), WINDOW).floorGrowth(at(101), WINDOW), "a token bucket grows");
    }

    @Test
    void aFallBelow08OfTheHighestFactorKafkaHeldOverTheLastSpanStartsANewEpoch() {
        FactorTrack track = track(1.0).next(0.85, at(100), WINDOW);
        assertEquals(0, track.epoch);
        assertEquals(1, track.next(0.79, at(100.5), WINDOW).epoch, "Kafka held 1.0 half a second ago");
        assertEquals(0, track.next(0.81, at(100.5), WINDOW).epoch);
    }

    @Test
    void whatCountsIsTheBoundKafkaHeldLately_notTheHighestFactorOfTheEpoch() {
        FactorTrack settled = track(1.0).next(0.85, at(100), WINDOW);
        // 30 s later Kafka has held 0.85 for a whole span: 0.7 is within 0.8 of it, though not of the epoch's 1.0.
        assertEquals(0, settled.next(0.7, at(130), WINDOW).epoch);
        // 1 s after the fall Kafka's bound still reflects the 1.0 of its window.
        assertEquals(1, settled.next(0.7, at(101), WINDOW).epoch);
    }

    @Test
    void aFallAsSlowAsKafkasWindowKeepsOneEpochThroughout() {
        FactorTrack track = track(1.0);
        double factor = 1.0;
        for (int step = 1; step <= 40; step++) {
            factor *= 0.95;
            track = track.next(factor, at(100 + 12 * step), WINDOW);
        }
        assertEquals(0, track.epoch, "5% a span never falls below 0.8 of what Kafka held");
        assertEquals(factor, track.kafkaFactor(at(100 + 12 * 40 + 12), WINDOW), EXACT);
    }

    @Test
    void alongAFastRampAnEpochStartsExactlyWhenTheFactorFallsBelow08OfWhatKafkaHeldOverTheLastSpan() {
        // 1.0 down to 0.05 by 0.05 every 2 s; every earlier track is kept to say what Kafka held when.
        List<FactorTrack> tracks = new ArrayList<>(List.of(track(1.0)));
        List<Long> since = new ArrayList<>(List.of(Long.MIN_VALUE));
        long epochStart = Long.MIN_VALUE;
        int epochs = 0;
        for (int step = 1; step <= 19; step++) {
            long now = at(100 + 2 * step);
            double factor = 1.0 - 0.05 * step;
            double held = 0.0;
            for (long moment = now; moment >= Math.max(epochStart, now - WINDOW.spanNanos()); moment -= WINDOW.tickNanos()) {
                int inForce = since.size() - 1;
                while (since.get(inForce) > moment) {
                    inForce--;
                }
                held = Math.max(held, tracks.get(inForce).kafkaFactor(moment, WINDOW));
            }
            FactorTrack previous = tracks.get(tracks.size() - 1);
            FactorTrack next = previous.next(factor, now, WINDOW);
            boolean newEpoch = next.epoch != previous.epoch;
            assertEquals(factor < 0.8 * held, newEpoch, "step " + step + ": factor " + factor + ", Kafka held up to " + held);
            if (newEpoch) {
                epochs++;
                epochStart = now;
            }
            tracks.add(next);
            since.add(now);
        }
        assertTrue(epochs >= 2 && epochs <= 6, "a 38 s ramp through Kafka's 12 s window: a few fresh starts, not one per step: " + epochs);
    }

    @Test
    void aLongHistoryGivesKafkaTheSameFactorAsTheDefinitionOverEveryChange() {
        FactorTrack track = track(1.0);
        List<double[]> changes = new ArrayList<>(); // {second, factor}
        double factor = 1.0;
        java.util.Random random = new java.util.Random(7);
        for (int i = 1; i <= 600; i++) {
            double second = 100 + i * 0.7;
            factor = Math.min(1.0, Math.max(0.05, factor + (random.nextDouble() - 0.5) * 0.08));
            FactorTrack next = track.next(factor, at(second), WINDOW);
            if (next.epoch != track.epoch) {
                changes.clear();
            }
            track = next;
            changes.add(new double[] {second, factor});
            double now = second + 0.3;
            assertEquals(definition(changes, changes.size() > 0 && track.epoch > 0 ? epochStartOf(changes) : Double.NEGATIVE_INFINITY, now),
                    track.kafkaFactor(at(now), WINDOW), 1e-9, "change " + i);
        }
    }

    @Test
    void controllerMutationsAreATokenBucket_theFactorAsItIs_newEpochsOnlyOnAPause() {
        FactorTrack track = FactorTrack.starting(1.0, false).next(0.5, at(100), WINDOW);
        assertEquals(0.5, track.kafkaFactor(at(100), WINDOW));
        track = track.next(0.1, at(101), WINDOW);
        assertEquals(0, track.epoch);
        assertEquals(1, track.next(0.0, at(102), WINDOW).epoch);
    }

    private static double epochStartOf(List<double[]> changes) {
        return changes.get(0)[0] - 0.25; // a fresh epoch counts as one tick old
    }

    /**
     * The factor averaged over the last divisor of Kafka's window (within the epoch), each moment
     * counted at the highest factor in force since; before the epoch's first change the factor
     * of the first epoch is 1.0.
     */
    private static double definition(List<double[]> changes, double epochStart, double now) {
        double age = now - epochStart;
        double divisor = age < 12 ? Math.max(10.5, age) : 11.5;
        double from = Math.max(epochStart, now - divisor);
        double held = 0;
        double highest = 0;
        double end = now;
        for (int i = changes.size() - 1; i >= -1 && end > from; i--) {
            double begin = i > 0 ? Math.max(changes.get(i)[0], from) : from;
            highest = Math.max(highest, i >= 0 ? changes.get(i)[1] : 1.0);
            held += highest * (end - begin);
            end = begin;
        }
        double last = changes.get(changes.size() - 1)[1];
        return last >= 1.0 ? 1.0 : held / divisor;
    }
}
