package io.kafkathrottle.shim;

import static io.kafkathrottle.shim.ReportTrigger.Reason.CROSSING;
import static io.kafkathrottle.shim.ReportTrigger.Reason.DUE;
import static io.kafkathrottle.shim.ReportTrigger.Reason.MOVE;
import static io.kafkathrottle.shim.ReportTrigger.Reason.NONE;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.FileStore;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Set;

import org.junit.jupiter.api.Test;

import com.fasterxml.jackson.databind.ObjectMapper;

/** When the shim sends a volume report: levels, hysteresis and the rate limits, on a clock the test moves. */
class ReportTriggerTest {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final long MS = 1_000_000L;
    private static final Duration POLL = Duration.ofSeconds(5);
    private static final long SAMPLE = 100 * MS;
    private static final long TOTAL = 100_000;
    /** A data dir and a metadata dir of its own. */
    private static final List<NodeVolumes.Directory> DIRS = List.of(new NodeVolumes.Directory(Path.of("/meta"), true, false),
            new NodeVolumes.Directory(Path.of("/data"), false, true));

    private final ReportTrigger trigger = new ReportTrigger(POLL, DIRS);
    private final long[] totals = {TOTAL, TOTAL};
    private final long[] usables = {90_000, 90_000};

    private static ReportLevels.Limit bytes(double hysteresis, double... levels) {
        return new ReportLevels.Limit(false, levels, hysteresis);
    }

    private static ReportLevels levels(ReportLevels.Limit data, ReportLevels.Limit metadata, double moveShare, Map<String, Long> takeHold) {
        return new ReportLevels(data, metadata, moveShare, 250, takeHold);
    }

    /** The levels most tests use: data at 10,000 bytes (hysteresis 1,000), no metadata limit, moves of half the total. */
    private static ReportLevels dataAt10k() {
        return levels(bytes(1_000, 10_000), null, 0.5, Map.of());
    }

    private NodeVolumes.Report report() {
        return new NodeVolumes.Report(new byte[0], 2, Set.of(), 0, new FileStore[2], totals.clone(), usables.clone(),
                new boolean[] {false, true});
    }

    private ReportTrigger.Reason at(long nanos, long metaUsable, long dataUsable) {
        usables[0] = metaUsable;
        usables[1] = dataUsable;
        return trigger.evaluate(nanos, totals, usables);
    }

    private void send(long nanos, ReportTrigger.Reason reason) {
        trigger.sent(nanos, reason, report(), POLL);
    }

    /** The first report at 0, under {@code levels}. */
    private void started(ReportLevels levels, long dataUsable) {
        trigger.levels(levels);
        assertEquals(DUE, at(0, 90_000, dataUsable), "the first report at once");
        send(0, DUE);
    }

    @Test
    void withoutLevelsTheReportsGoAtThePollIntervalAndNothingIsSampled() {
        assertEquals(DUE, at(0, 90_000, 90_000));
        send(0, DUE);
        assertFalse(trigger.samples());
        assertEquals(POLL.toNanos(), trigger.nextWake(1 * MS, SAMPLE), "asleep until the next report");
        assertEquals(NONE, at(100 * MS, 0, 0), "a full disk between two reports waits for the poll interval, as before");
        assertEquals(NONE, at(POLL.toNanos() - 1, 0, 0));
        assertEquals(DUE, at(POLL.toNanos(), 0, 0));
    }

    @Test
    void aCrossingIsReportedAtTheFirstSampleThatSeesIt() {
        started(dataAt10k(), 20_000);
        assertTrue(trigger.samples());
        assertEquals(SAMPLE + 300 * MS, trigger.nextWake(300 * MS, SAMPLE), "sampled every sample interval");
        assertEquals(NONE, at(300 * MS, 90_000, 15_000));
        assertEquals(NONE, at(400 * MS, 90_000, 10_001));
        assertEquals(CROSSING, at(500 * MS, 90_000, 10_000), "at the level: crossed downward");
    }

    @Test
    void aVolumeHoveringAtALevelReportsOnceEachWayNotAtEverySample() {
        started(dataAt10k(), 20_000);
        assertEquals(CROSSING, at(300 * MS, 90_000, 9_990));
        send(300 * MS, CROSSING);
        long t = 600 * MS;
        for (long usable : new long[] {10_010, 9_995, 10_900, 9_999, 11_000, 10_500}) { // within the hysteresis
            assertEquals(NONE, at(t, 90_000, usable), "usable " + usable);
            t += SAMPLE;
        }
        assertEquals(CROSSING, at(t, 90_000, 11_001), "upward above the level plus the hysteresis");
        send(t, CROSSING);
        t += 300 * MS;
        for (long usable : new long[] {10_999, 10_001, 10_500}) {
            assertEquals(NONE, at(t, 90_000, usable), "usable " + usable);
            t += SAMPLE;
        }
        assertEquals(CROSSING, at(t, 90_000, 10_000));
    }

    @Test
    void aCrossingWaitsForTheMinimumIntervalThenGoesAtOnce() {
        started(dataAt10k(), 20_000);
        assertEquals(NONE, at(100 * MS, 90_000, 5_000), "250 ms after the last report at the soonest");
        assertEquals(200 * MS, trigger.nextWake(100 * MS, SAMPLE));
        assertEquals(NONE, at(200 * MS, 90_000, 5_000));
        assertEquals(250 * MS, trigger.nextWake(200 * MS, SAMPLE), "woken when the interval has passed, not at the next sample");
        assertEquals(CROSSING, at(250 * MS, 90_000, 5_000));
        send(250 * MS, CROSSING);
        assertEquals(NONE, at(350 * MS, 90_000, 11_500), "crossed back, within the interval again");
        assertEquals(CROSSING, at(500 * MS, 90_000, 11_500));
    }

    /** The service's pace as it says it (report_rate.py): four reports in a row, then one per 250 ms. */
    private static ReportLevels burstOf4(double moveShare) {
        return new ReportLevels(bytes(1_000, 10_000), null, moveShare, 250, 4, Map.of());
    }

    @Test
    void aCrossingRightAfterAMoveReportGoesAtOnceWhileTheServiceHasATokenForIt() {
        started(burstOf4(0.01), 90_000); // the bucket: 4, less the first report: 3
        assertEquals(MOVE, at(100 * MS, 90_000, 41_000), "a fill caught half way: a move report");
        send(100 * MS, MOVE); // 3 + 0.4 refilled - 1 = 2.4
        assertEquals(CROSSING, at(200 * MS, 90_000, 9_000), "the crossing a sample later is not held for min_interval_ms");
        send(200 * MS, CROSSING); // 1.8
        assertEquals(CROSSING, at(300 * MS, 90_000, 11_500), "nor the way back");
        send(300 * MS, CROSSING); // 1.2
        assertEquals(CROSSING, at(400 * MS, 90_000, 9_500));
        send(400 * MS, CROSSING); // 0.6: the service would refuse one more now
        assertEquals(NONE, at(450 * MS, 90_000, 11_500), "the next crossing waits for a token");
        assertEquals(500 * MS, trigger.nextWake(450 * MS, SAMPLE), "woken when one is back");
        assertEquals(CROSSING, at(500 * MS, 90_000, 11_500));
    }

    @Test
    void aMoveReportLeavesATokenInHandForACrossing() {
        started(burstOf4(0.01), 90_000); // 3
        assertEquals(CROSSING, at(100 * MS, 90_000, 9_000));
        send(100 * MS, CROSSING); // 2.4
        assertEquals(CROSSING, at(200 * MS, 90_000, 12_000));
        send(200 * MS, CROSSING); // 1.8
        assertEquals(CROSSING, at(300 * MS, 90_000, 9_500));
        send(300 * MS, CROSSING); // 1.2
        assertEquals(NONE, at(350 * MS, 90_000, 8_000), "a move (1,500 bytes) with fewer than two tokens waits");
        assertEquals(NONE, at(450 * MS, 90_000, 8_000), "1.8 tokens");
        assertEquals(MOVE, at(500 * MS, 90_000, 8_000), "two tokens");
        send(500 * MS, MOVE); // 1.0
        assertEquals(CROSSING, at(510 * MS, 90_000, 12_000), "a crossing takes the token the move left");
    }

    @Test
    void withoutABurstACrossingWaitsForTheMinimumIntervalAsBefore() {
        started(levels(bytes(1_000, 10_000), null, 0.01, Map.of()), 90_000); // burst 1: what an older service implies
        assertEquals(NONE, at(100 * MS, 90_000, 41_000), "a move, within 250 ms of the last report");
        assertEquals(MOVE, at(250 * MS, 90_000, 41_000));
        send(250 * MS, MOVE);
        assertEquals(NONE, at(350 * MS, 90_000, 9_000));
        assertEquals(NONE, at(450 * MS, 90_000, 9_000));
        assertEquals(500 * MS, trigger.nextWake(450 * MS, SAMPLE), "250 ms after the move report");
        assertEquals(CROSSING, at(500 * MS, 90_000, 9_000));
    }

    @Test
    void movesAloneAreReportedAtMostOnceASecondButCrossingsAreNotHeldBack() {
        started(levels(bytes(0, 10_000), null, 0.01, Map.of()), 90_000); // a move: more than 1,000 bytes
        assertEquals(NONE, at(300 * MS, 90_000, 89_000), "1,000 bytes: not more than the share");
        assertEquals(MOVE, at(400 * MS, 90_000, 88_999));
        send(400 * MS, MOVE);
        long t = 700 * MS;
        long usable = 88_999;
        for (; t < 1_400 * MS; t += SAMPLE) {
            usable -= 5_000;
            assertEquals(NONE, at(t, 90_000, usable), "a second after the last move at the soonest, at " + t / MS + " ms");
        }
        assertEquals(1_400 * MS, trigger.nextWake(1_300 * MS, SAMPLE));
        assertEquals(MOVE, at(1_400 * MS, 90_000, usable));
        send(1_400 * MS, MOVE);
        assertEquals(CROSSING, at(1_700 * MS, 90_000, 9_000), "a crossing 300 ms after a move goes at once");
    }

    @Test
    void eachDirIsJudgedByTheLevelsOfWhatItHolds() {
        ReportLevels.Limit dataRatio = new ReportLevels.Limit(true, new double[] {0.1, 0.2}, 0.0);
        started(levels(dataRatio, bytes(0, 50_000), 0.9, Map.of()), 90_000);
        assertEquals(NONE, at(300 * MS, 60_000, 90_000));
        assertEquals(CROSSING, at(400 * MS, 49_000, 90_000), "the metadata dir at the metadata limit");
        send(400 * MS, CROSSING);
        assertEquals(NONE, at(700 * MS, 49_000, 50_000), "the data dir under the metadata limit's level: nothing");
        assertEquals(CROSSING, at(800 * MS, 49_000, 20_000), "the data dir at its soft level, 0.2 of its total");
        send(800 * MS, CROSSING);
        assertEquals(NONE, at(1_100 * MS, 19_000, 20_000), "the metadata dir under the data limit's ratio: nothing");
    }

    @Test
    void theTakeHoldLevelOfTheNodesOwnDirIsALevelToo() {
        started(levels(bytes(0, 1_000), null, 0.05, Map.of("/data", 60_000L)), 62_000);
        assertEquals(NONE, at(300 * MS, 90_000, 61_000));
        assertEquals(CROSSING, at(400 * MS, 90_000, 60_000));
        send(400 * MS, CROSSING);
        assertEquals(NONE, at(700 * MS, 90_000, 64_000), "its hysteresis: the move share of the total, 5,000 bytes");
        assertEquals(CROSSING, at(800 * MS, 90_000, 65_001));
    }

    @Test
    void aLevelThatArrivesBetweenReportsCountsFromWhereTheLastReportPutTheVolume() {
        started(dataAt10k(), 90_000);
        assertEquals(NONE, at(300 * MS, 90_000, 70_000));
        trigger.levels(levels(bytes(1_000, 10_000), null, 0.5, Map.of("/data", 80_000L)));
        assertEquals(CROSSING, at(400 * MS, 90_000, 70_000), "sent at 90,000, now under 80,000: crossed since the last report");
        send(400 * MS, CROSSING);
        trigger.levels(levels(bytes(1_000, 10_000), null, 0.5, Map.of("/data", 75_000L)));
        assertEquals(NONE, at(700 * MS, 90_000, 70_000), "sent under it already");
    }

    @Test
    void whileTheServiceAsksTheShimToWaitNothingIsSampledOrSent() {
        started(dataAt10k(), 90_000);
        trigger.sent(300 * MS, DUE, report(), VolumeReporter.NOT_TAKEN_RETRY);
        assertFalse(trigger.samples());
        assertEquals(NONE, at(400 * MS, 90_000, 0));
        long due = 300 * MS + VolumeReporter.NOT_TAKEN_RETRY.toNanos();
        assertEquals(due, trigger.nextWake(400 * MS, SAMPLE));
        assertEquals(DUE, at(due, 90_000, 0));
    }

    @Test
    void reportOnIsReadFromTheTableWithThisNodesTakeHoldLevelsOnly() throws Exception {
        String table = StubService.table(1.0, "{}", "[]", null);
        String body = table.substring(0, table.length() - 1) + ", \"report_on\": {\"kind\": \"min-available-ratio\", \"levels\": [0.05, 0.1],"
                + " \"hysteresis\": 0.01, \"metadata\": {\"kind\": \"min-available-bytes\", \"levels\": [1000], \"hysteresis\": 0},"
                + " \"move_share\": 0.01, \"min_interval_ms\": 250, \"take_hold\": {\"7\": {\"/data/./k\": 123}, \"8\": {\"/x\": 1}}}}";
        ServiceTable parsed = ServiceTable.fromJson(JSON.readTree(body), 7);
        ReportLevels levels = parsed.reportOn();
        assertNotNull(levels);
        assertTrue(levels.data.ratio());
        assertEquals(List.of(0.05, 0.1), List.of(levels.data.levels()[0], levels.data.levels()[1]));
        assertEquals(0.01, levels.data.hysteresis());
        assertFalse(levels.metadata.ratio());
        assertEquals(250, levels.minIntervalMs);
        assertEquals(Map.of("/data/k", 123L), levels.takeHold, "this node's, named as the shim names its dirs");
        assertNull(ServiceTable.fromJson(JSON.readTree(table), 7).reportOn(), "an older service: none");
        String bad = table.substring(0, table.length() - 1) + ", \"report_on\": {\"kind\": \"free-space\"}}";
        ServiceTable unusable = ServiceTable.fromJson(JSON.readTree(bad), 7);
        assertNull(unusable.reportOn());
        assertTrue(unusable.reportOnProblem().contains("report_on.kind"), unusable.reportOnProblem());
        assertEquals(1.0, unusable.factor(), "the table is used all the same");
    }
}
