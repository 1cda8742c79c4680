"""Pure tests of recoverd-kube's translation rules (tools/kube/translate.py, no server): Kubernetes
objects to Platform messages, the fault ConfigMaps, the reset document
rules and the annotation merge. Run with the generated *_pb2 modules and
tools/kube on PYTHONPATH."""

import hashlib
import json
import unittest

import translate as rk


def podgroup(labels=None, annotations=None, uid="job-1"):
    return {"metadata": {
        "name": "pg-" + uid, "namespace": "train",
        "labels": labels or {}, "annotations": annotations or {},
        "ownerReferences": [
            {"kind": "AscendJob", "name": "other", "uid": "not-me"},
            {"kind": "AscendJob", "name": "llama", "uid": uid,
             "controller": True}]}}


def pod(rank, node, devices, uid, created="2026-12-01T00:00:00Z",
        phase="Running", real=True, deleting=False, owner="job-1"):
    ann = {"hccl/rankIndex": str(rank)}
    if devices is not None:
        ann["ascend.kubectl.kubernetes.io/ascend-910-configuration"] = \
            json.dumps({"pod_name": "p", "server_id": node, "super_pod_id": 3,
                        "devices": [{"device_id": d, "device_ip": "x"}
                                    for d in devices]})
    if real:
        ann["huawei.com/AscendReal"] = "Ascend910-0"
    meta = {"name": "p%d" % rank, "namespace": "train", "uid": uid,
            "annotations": ann, "creationTimestamp": created,
            "ownerReferences": [{"uid": owner, "controller": True}]}
    if deleting:
        meta["deletionTimestamp"] = "2026-12-01T00:00:09Z"
    return {"metadata": meta, "spec": {"nodeName": node},
            "status": {"phase": phase}}


def device_info(lists, check=None):
    info = {"DeviceList": lists, "UpdateTime": 1735689600}
    code = check if check is not None else \
        hashlib.sha256(rk.go_json(info)).hexdigest()
    return {"metadata": {"name": "mindx-dl-deviceinfo-n1",
                         "namespace": "kube-system"},
            "data": {"DeviceInfoCfg": json.dumps(
                {"DeviceInfo": info, "SuperPodID": 0, "ServerIndex": 0,
                 "CheckCode": code})}}


def fault(name, codes, level, per_code=None):
    return {"fault_type": "CardUnhealthy", "npu_name": name,
            "fault_level": level, "fault_code": codes,
            "fault_time_and_level_map": per_code or {}}


class JobSpecTest(unittest.TestCase):
    def test_ids_switches_and_strategies(self):
        spec = rk.job_spec(podgroup(
            labels={"process-recover-enable": "on", "framework": "pytorch",
                    "fault-scheduling": "grace", "pod-rescheduling": "on",
                    "subHealthyStrategy": "graceExit"},
            annotations={"recover-strategy": "dump, retry,bogus,recover",
                         "ProcessRecoverStrategy": "recover"}), [])
        self.assertEqual(spec.jobId, "job-1")
        self.assertEqual(spec.name, "llama")
        self.assertEqual(spec.namespace, "train")
        self.assertEqual(list(spec.recoverStrategies),
                         ["retry", "recover", "dump"])
        self.assertTrue(spec.processRecoverEnable)
        self.assertTrue(spec.platformMode)
        self.assertTrue(spec.podRescheduling)
        self.assertEqual(spec.faultScheduling, "grace")
        self.assertEqual(spec.framework, "pytorch")
        self.assertEqual(spec.subHealthyStrategy, "graceExit")

    def test_pause_label_keeps_the_job_enabled(self):
        for value, enabled in (("on", True), ("pause", True), ("", False),
                               ("off", False)):
            spec = rk.job_spec(podgroup(
                labels={"process-recover-enable": value}), [])
            self.assertEqual(spec.processRecoverEnable, enabled, value)

    def test_global_ranks_are_pod_rank_times_devices_plus_index(self):
        spec = rk.job_spec(podgroup(), [
            pod(1, "n1", ["4", "5"], "u1"), pod(0, "n0", ["0", "1"], "u0"),
            pod(2, "", ["0", "1"], "u2"),  # not scheduled: left out
            pod(3, "n3", None, "u3", phase="Pending", real=False)])
        self.assertEqual([p.podRank for p in spec.pods], [0, 1, 3])
        self.assertEqual([(d.deviceId, d.rankId) for d in spec.pods[1].devices],
                         [("4", "2"), ("5", "3")])
        self.assertEqual(spec.pods[0].superPodId, 3)
        self.assertTrue(spec.pods[0].running)
        self.assertFalse(spec.pods[2].running)
        self.assertEqual(spec.pods[2].superPodId, -1)

    def test_a_rescheduled_pod_replaces_the_old_one(self):
        spec = rk.job_spec(podgroup(), [
            pod(0, "n0", ["0"], "old", created="2026-12-01T00:00:00Z",
                deleting=True),
            pod(0, "n9", ["0"], "new", created="2026-12-01T00:01:00Z")])
        self.assertEqual([(p.uid, p.nodeName) for p in spec.pods],
                         [("new", "n9")])

    def test_devices_not_really_allocated_are_not_running(self):
        spec = rk.job_spec(podgroup(), [pod(0, "n0", ["0"], "u", real=False)])
        self.assertFalse(spec.pods[0].running)


class FaultConfigMapTest(unittest.TestCase):
    def test_levels_per_code_and_free_restart_gate(self):
        cm = device_info({
            "huawei.com/Ascend910": "Ascend910-2",
            "huawei.com/Ascend910-Unhealthy": "Ascend910-1",
            "huawei.com/Ascend910-Fault": json.dumps([
                fault("Ascend910-0", "80E01801,8C1F860B", "RestartBusiness",
                      {"8C1F860B": {"fault_level": "RestartRequest"}}),
                fault("Ascend910-1", "81078603", "FreeRestartNPU"),
                fault("Ascend910-3", "81078603", "FreeRestartNPU")])})
        devices, node = rk.device_info_faults(cm)
        self.assertEqual(devices["0"], [("80E01801", "RestartBusiness"),
                                        ("8C1F860B", "RestartRequest")])
        self.assertEqual(devices["1"], [("81078603", "FreeRestartNPU")])
        self.assertNotIn("3", devices)  # free restart, not listed unhealthy
        self.assertEqual(node, [])

    def test_a_wrong_or_missing_check_code_ignores_the_version(self):
        lists = {"huawei.com/Ascend910-Fault": json.dumps(
            [fault("Ascend910-0", "80E01801", "RestartBusiness")])}
        self.assertIsNone(rk.device_info_faults(device_info(lists, "00")))
        self.assertIsNone(rk.device_info_faults(device_info(lists, "")))
        self.assertIsNotNone(rk.device_info_faults(device_info(lists)))

    def test_check_code_is_sha256_of_go_json(self):
        # Go escapes <, > and & and sorts map keys.
        self.assertEqual(rk.go_json({"b": "<&>", "a": 1}),
                         b'{"a":1,"b":"\\u003c\\u0026\\u003e"}')

    def test_switch_and_node_status_are_node_level_faults(self):
        cm = device_info({"huawei.com/npu": ""})
        cm["data"]["SwitchInfoCfg"] = json.dumps({
            "NodeStatus": "SubHealthy",
            "FaultCode": [json.dumps({"AssembledFaultCode": "[0x08520003]"})]})
        self.assertEqual(rk.device_info_faults(cm)[1],
                         [("[0x08520003]", "SubHealthFault")])
        info = {"FaultDevList": [{"DeviceType": "CPU", "DeviceId": 0,
                                  "FaultCode": ["C1"]}],
                "NodeStatus": "UnHealthy"}
        node_cm = {"data": {"NodeInfo": json.dumps({
            "NodeInfo": info,
            "CheckCode": hashlib.sha256(rk.go_json(info)).hexdigest()})}}
        self.assertEqual(rk.node_info_faults(node_cm), [("C1", "SeparateNPU")])
        info["NodeStatus"] = "Healthy"
        node_cm["data"]["NodeInfo"] = json.dumps({
            "NodeInfo": info,
            "CheckCode": hashlib.sha256(rk.go_json(info)).hexdigest()})
        self.assertEqual(rk.node_info_faults(node_cm), [])

    def test_job_faults_cover_only_the_jobs_devices_and_carry_the_uid(self):
        spec = rk.job_spec(podgroup(), [pod(0, "n1", ["0", "1"], "u0")])
        faults = rk.job_faults(
            spec, {"n1": {"1": [("80E01801", "RestartBusiness")],
                          "7": [("80E01801", "RestartBusiness")]},
                   "n2": {"0": [("X", "SeparateNPU")]}},
            {"n1": [("S", "SeparateNPU")]})
        self.assertEqual(
            [(f.nodeName, f.deviceId, list(f.faultCodes), f.faultLevel,
              f.podUid) for f in faults.faults],
            [("n1", "", ["S"], "SeparateNPU", "u0"),
             ("n1", "1", ["80E01801"], "RestartBusiness", "u0")])


class ReleaseTest(unittest.TestCase):
    def nodes(self, **sdids):
        return {name: {"metadata": {"name": name, "annotations": {
            "baseDeviceInfos": json.dumps(
                {"Ascend910-%d" % i: {"IP": "x", "SuperDeviceID": v}
                 for i, v in enumerate(ids)})}}} for name, ids in sdids.items()}

    def test_fault_nodes_and_the_healthy_nodes_of_their_super_pod(self):
        spec = rk.job_spec(podgroup(), [pod(0, "n0", ["0", "1"], "u0"),
                                        pod(1, "n1", ["0", "1"], "u1")])
        entry = rk.release_entry(spec, {"3"}, self.nodes(n1=[7, 6]), 99)
        self.assertEqual(entry, {"3": {
            "SdIds": ["6", "7"], "FaultNodes": {"n1": {}},
            "NodeNames": ["n0"], "FaultTimes": 99, "JobId": "job-1"}})

    def test_not_written_without_super_pods_or_device_ids(self):
        spec = rk.job_spec(podgroup(), [pod(0, "n0", ["0"], "u0")])
        self.assertIsNone(rk.release_entry(spec, {"0"}, {}, 1))
        self.assertIsNone(rk.release_entry(spec, set(), self.nodes(n0=[1]), 1))
        spec.pods[0].superPodId = -1
        self.assertIsNone(rk.release_entry(spec, {"0"}, self.nodes(n0=[1]), 1))

    def test_fault_ranks_from_the_reset_document_and_the_confirm_list(self):
        status = rk.platform_pb2.JobStatus(
            resetJson=json.dumps({"RankList": [{"RankId": 8}]}))
        status.spec.annotations["ProcessConfirmFault"] = "9:1, 10:0"
        self.assertEqual(rk.fault_ranks(status), {"8", "9", "10"})


class ResetAndMergeTest(unittest.TestCase):
    def test_reset_rules(self):
        self.assertFalse(rk.reset_writable(json.dumps(
            {"RankList": [{"RankId": 1, "Policy": "restart"}]})))
        self.assertTrue(rk.reset_writable('{"status":"initializing"}'))
        clear = json.dumps({"RankList": [], "RetryTime": 0,
                            "FaultFlushing": False})
        self.assertTrue(rk.reset_untouched('{"status":"initializing"}', clear))
        self.assertFalse(rk.reset_untouched(
            '{"status":"initializing"}',
            json.dumps({"RankList": [{"RankId": 8}]})))

    def test_merge_the_side_that_changed_wins(self):
        base = {"ProcessResultFault": "stale:1", "ProcessConfirmFault": None}
        # recoverd removed a stale result and wrote a confirm list.
        rd_set, rd_remove, pg, agreed = rk.merge_annotations(
            {"ProcessResultFault": "stale:1"},
            {"ProcessConfirmFault": "8:1"}, base)
        self.assertEqual((rd_set, rd_remove), ({}, []))
        self.assertEqual(pg, {"ProcessResultFault": None,
                              "ProcessConfirmFault": "8:1"})
        self.assertEqual(agreed["ProcessConfirmFault"], "8:1")
        # the platform answered in the meantime: its value is kept.
        rd_set, rd_remove, pg, _ = rk.merge_annotations(
            {"ProcessResultFault": "2:1"}, {}, base)
        self.assertEqual(rd_set, {"ProcessResultFault": "2:1"})

    def test_a_jobs_restart_budget_goes_from_the_podgroup_to_recoverd(self):
        rd_set, _, pg, _ = rk.merge_annotations(
            {"recoverd.io/restart-budget": "3/1h"}, {}, {})
        self.assertEqual(rd_set, {"recoverd.io/restart-budget": "3/1h"})
        self.assertEqual(pg, {})

    def test_merge_without_agreement_the_owner_wins(self):
        rd_set, rd_remove, pg, _ = rk.merge_annotations(
            {"ProcessRecoverStrategy": "recover", "ProcessRecoverStatus": "x"},
            {"ProcessRecoverStatus": "recover-success", "RankTableReady": "t"},
            {})
        self.assertEqual(rd_set, {"ProcessRecoverStrategy": "recover"})
        self.assertEqual(rd_remove, ["RankTableReady"])
        self.assertEqual(pg, {"ProcessRecoverStatus": "recover-success"})


if __name__ == "__main__":
    unittest.main()
