//! A heterogeneous step rebuilt from its components' layouts (what slurmctld answers): the
//! step's task count and this node (`STEP_TASKS JOB NODE NODES TASKS HOSTNAME`), this node's
//! task ids (`0,1`), then one line per component: `JOB|NODE_LIST|IDS;IDS...`, or `JOB|!` for
//! one slurmctld refused.
#![no_main]
use libfuzzer_sys::fuzz_target;
use tfcluster::core::het::{Answer, ComponentLayout, HetLayout, Own};

fn ids(text: &str) -> Vec<u32> {
    text.split(',').filter_map(|t| t.parse().ok()).collect()
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let mut lines = text.lines();
    let head: Vec<&str> = lines.next().unwrap_or("").split(' ').collect();
    let number = |i: usize| head.get(i).and_then(|t| t.parse::<u32>().ok());
    let (Some(step_tasks), Some(job_id), Some(node), Some(nodes), Some(tasks)) =
        (number(0), number(1), number(2), number(3), number(4))
    else {
        return;
    };
    let gtids = ids(lines.next().unwrap_or(""));
    let answers: Vec<Answer> = lines
        .zip(0..)
        .filter_map(|(line, component)| {
            let (job, rest) = line.split_once('|')?;
            let job_id = job.parse().ok()?;
            let layout = match rest.split_once('|') {
                None => Err("Invalid job id specified".to_string()),
                Some((node_list, tids)) => {
                    let tids: Vec<Vec<u32>> = tids.split(';').map(ids).collect();
                    let tasks = tids.iter().map(|t| t.len() as u32).sum();
                    Ok(ComponentLayout {
                        node_list: node_list.into(),
                        tids,
                        tasks,
                    })
                }
            };
            Some(Answer {
                component,
                job_id,
                layout,
            })
        })
        .collect();
    let own = Own {
        job_id,
        node: node as usize,
        nodes,
        tasks,
        gtids: &gtids,
        hostname: head.get(5).copied(),
    };
    let Ok(het) = HetLayout::new(&answers, step_tasks, own) else {
        return;
    };
    let Ok(layout) = het.layout() else {
        return;
    };
    // Every rank is placed; this node's tasks are on this node, each in a slot of its own.
    assert_eq!(layout.tasks(), step_tasks);
    let slots = het.slots(&layout, &gtids);
    let mine = layout
        .node(het.own_node())
        .expect("this node is in the step");
    for (&gtid, &slot) in gtids.iter().zip(&slots) {
        assert_eq!(mine.get(slot), Some(&(het.own_offset + gtid)));
    }
});
