/**
 * The documents the offline `search` tool searches. Written for Baton's demos and tests: short
 * overviews of the topics of the example agents' prompts, plus general science, history and
 * medicine so other agents find something too. Figures are rounded and hedged on purpose; this
 * is demo material, not a source to cite.
 */

/** One searchable document. */
export interface CorpusDocument {
  /** Stable identifier, unique within a corpus. */
  readonly id: string;
  readonly title: string;
  /** Two to five sentences of plain text. */
  readonly text: string;
  /** Where the document comes from, shown with each search result. */
  readonly source: string;
  /** Extra search keywords that the text does not spell out. */
  readonly tags?: readonly string[];
}

const doc = (id: string, title: string, tags: readonly string[], text: string): CorpusDocument => ({
  id,
  title,
  text,
  source: `baton-corpus/${id}`,
  tags,
});

/** The bundled documents (48), grouped by topic. */
export const corpus: readonly CorpusDocument[] = Object.freeze([
  // Electric vehicles
  doc(
    'ev-fleet-today',
    'The global electric car fleet today',
    ['EV', 'EVs', 'battery electric', 'plug-in hybrid', 'stock'],
    'Around 40 million electric cars were on the world’s roads at the end of 2023, counting battery electric and plug-in hybrid models. Roughly 14 million of them were sold in 2023 alone, close to one in five new cars. China accounts for more than half of the fleet, followed by Europe and the United States.',
  ),
  doc(
    'ev-2030-projections',
    'How many electric vehicles by 2030? Projections',
    ['EV', 'EVs', 'forecast', 'outlook', 'IEA', 'scenario'],
    'Projections for 2030 depend on policy scenarios. Outlooks based on policies already announced put the global electric car fleet at roughly 240 to 250 million by 2030, and more ambitious climate scenarios at well over 300 million. Electric cars would then be somewhere between 10 and 15 percent of all cars on the road, because the existing fleet of about 1.5 billion cars turns over slowly.',
  ),
  doc(
    'ev-battery-costs',
    'Battery costs and electric vehicle prices',
    ['EV', 'lithium-ion', 'price parity', 'kWh'],
    'Lithium-ion battery pack prices fell by about 90 percent between 2010 and the early 2020s, to somewhere near 140 US dollars per kilowatt-hour. Cheaper packs are the main reason electric cars approach purchase-price parity with petrol cars. Lithium iron phosphate (LFP) chemistries trade some range for lower cost and longer life.',
  ),
  doc(
    'ev-charging-infrastructure',
    'Charging infrastructure for electric vehicles',
    ['EV', 'chargers', 'fast charging', 'range anxiety'],
    'Most electric car charging happens at home or at work, overnight or during the day. Public fast chargers matter for long trips and for drivers without a driveway. The number of public charging points worldwide passed several million in the early 2020s, but their density varies greatly between countries and between cities and rural areas.',
  ),
  doc(
    'ev-barriers',
    'What slows the adoption of electric vehicles',
    ['EV', 'adoption', 'barriers', 'subsidies'],
    'The main barriers to electric vehicle adoption are upfront price, charging access, range concerns and the supply of battery minerals such as lithium, nickel and cobalt. Subsidies, fuel-economy rules and bans on new combustion-engine sales planned for the 2030s push adoption forward. Used-car markets and grid upgrades decide how fast lower-income drivers can switch.',
  ),
  // Solar and wind for homes
  doc(
    'solar-residential',
    'Rooftop solar for homes',
    ['photovoltaic', 'PV', 'panels', 'residential', 'renewable energy'],
    'A typical residential rooftop solar system has 5 to 10 kilowatts of panels and produces most of its energy around midday. Panels usually carry 25-year warranties and lose roughly half a percent of output per year. Solar works almost anywhere with an unshaded roof facing the sun, needs little maintenance and makes no noise.',
  ),
  doc(
    'wind-residential',
    'Small wind turbines for homes',
    ['turbine', 'residential', 'renewable energy', 'wind speed'],
    'Small wind turbines for homes only pay off where the average wind speed is high, often quoted as at least 4 to 5 metres per second at hub height. They need a tall tower clear of trees and buildings, planning permission in many places, and more maintenance than solar panels because they have moving parts. On a good rural site they can produce power at night and in winter, when solar output is low.',
  ),
  doc(
    'solar-vs-wind-homes',
    'Solar versus wind energy for residential power generation',
    ['compare', 'comparison', 'residential', 'renewable energy', 'payback'],
    'For most homes, rooftop solar is cheaper per kilowatt-hour, easier to permit and more predictable than a small wind turbine. Wind can beat solar on open, windy rural land and complements it seasonally. Some off-grid homes combine both with a battery so that one source covers the gaps of the other.',
  ),
  doc(
    'home-batteries-net-metering',
    'Home batteries and net metering',
    ['storage', 'battery', 'grid', 'feed-in tariff'],
    'Net metering credits a household for the electricity its panels or turbine send to the grid, which shortens the payback period of a system. Where credits are low, a home battery lets a household use its midday solar power in the evening instead. Batteries add cost, so their value depends on local tariffs and on backup needs during outages.',
  ),
  // Remote work
  doc(
    'remote-work-call-center-study',
    'A randomized trial of working from home',
    ['remote work', 'telework', 'productivity', 'experiment', 'Ctrip'],
    'In a well-known randomized experiment at a Chinese travel agency, call-center employees who worked from home were about 13 percent more productive than those in the office, mostly because they took fewer breaks and sick days and worked more minutes per shift. Attrition fell by about half. The tasks were individual and easy to measure, which limits how far the result generalizes.',
  ),
  doc(
    'hybrid-work-evidence',
    'Hybrid work and productivity',
    ['remote work', 'hybrid', 'productivity', 'retention'],
    'A large randomized trial of hybrid work, with two home days a week, found no measurable loss of performance or promotion rates and a drop of about a third in resignations. Surveys show that most employees value hybrid arrangements roughly as much as a pay rise of several percent. Managers in the same studies tended to expect losses before the trial and to see none after it.',
  ),
  doc(
    'remote-work-collaboration',
    'Remote work, collaboration and innovation',
    ['remote work', 'collaboration', 'mentoring', 'innovation', 'criticism'],
    'Studies of firm-wide remote work found that collaboration networks became more static and siloed, with fewer connections between teams and more asynchronous communication. Critics argue that fully remote work hurts mentoring of junior staff and spontaneous exchange of ideas. The evidence suggests the effect of remote work depends strongly on the task, the team and how it is managed.',
  ),
  doc(
    'measuring-productivity',
    'Why productivity is hard to measure',
    ['productivity', 'measurement', 'knowledge work', 'bias'],
    'For knowledge work there is rarely a single output to count, so studies rely on proxies such as code commits, calls handled, sales or self-reports. Self-reported productivity tends to be higher than measured productivity. Selection effects also matter: people who choose to work remotely may differ from those who do not.',
  ),
  // Restaurant food waste
  doc(
    'food-waste-scale',
    'How much food is wasted',
    ['food waste', 'UNEP', 'food service', 'households'],
    'Roughly a billion tonnes of food are wasted each year worldwide, around a fifth of the food available to consumers. Households waste the most, but the food service sector, restaurants, canteens and hotels, accounts for more than a quarter of the total. Food waste also causes a significant share of global greenhouse gas emissions.',
  ),
  doc(
    'restaurant-food-waste-sources',
    'Where restaurants waste food',
    ['food waste', 'restaurants', 'kitchen', 'plate waste'],
    'Restaurant food waste comes from over-ordering and spoilage in storage, trimmings in preparation, overproduction of dishes, and food left on customers’ plates. Waste audits that weigh and categorise waste for a few weeks usually show that a handful of items cause most of it. Large portions and long menus both increase waste.',
  ),
  doc(
    'restaurant-food-waste-solutions',
    'Ways restaurants reduce food waste',
    ['food waste', 'restaurants', 'ideas', 'donation', 'composting', 'inventory'],
    'Proven ways to reduce restaurant food waste include tracking waste with scales or apps, ordering based on sales forecasts, first-in-first-out storage, smaller default portions with free refills, and shorter menus that share ingredients. Surplus food can be donated to food banks or sold at a discount through apps at closing time. What cannot be eaten can be composted or turned into biogas.',
  ),
  doc(
    'food-waste-technology',
    'Technology against food waste',
    ['food waste', 'AI', 'sensors', 'forecasting', 'innovation'],
    'Kitchens use smart scales and cameras that identify discarded food and report its cost, which makes waste visible to staff. Demand-forecasting software uses past sales, weather and events to plan production. Some chains report cutting kitchen food waste by a third or more within a year of such programs.',
  ),
  // Cryptocurrencies and banking
  doc(
    'crypto-basics',
    'What cryptocurrencies are',
    ['cryptocurrency', 'bitcoin', 'blockchain', 'decentralized'],
    'A cryptocurrency is a digital asset recorded on a blockchain, a shared ledger maintained by a network of computers instead of a central bank. Bitcoin, launched in 2009, was the first; thousands have followed. Prices are highly volatile, which makes most cryptocurrencies poor units of account for everyday prices.',
  ),
  doc(
    'banks-role',
    'What traditional banks do',
    ['banking', 'banks', 'credit', 'deposit insurance', 'lending'],
    'Banks take deposits, make loans, run payment systems and transform short-term savings into long-term credit such as mortgages. Deposits in most countries are insured up to a limit, and banks are supervised and must hold capital against losses. Lending and credit assessment are services that a payment network alone does not provide.',
  ),
  doc(
    'crypto-vs-banking',
    'Will cryptocurrencies replace banks?',
    ['cryptocurrency', 'banking', 'debate', 'stablecoins', 'regulation'],
    'Supporters argue that cryptocurrencies allow cheaper cross-border payments, financial access without a bank account and money outside government control. Sceptics point to volatility, fraud and hacks, energy use, and the fact that crypto offers no deposit insurance or lender of last resort. So far banks have adopted parts of the technology, such as custody and tokenized deposits, rather than being replaced.',
  ),
  doc(
    'stablecoins-cbdc',
    'Stablecoins and central bank digital currencies',
    ['stablecoin', 'CBDC', 'digital currency', 'payments'],
    'Stablecoins are tokens pegged to a currency such as the US dollar and backed by reserves; they are mostly used for trading and cross-border transfers. Many central banks are studying or piloting central bank digital currencies, which would be digital cash issued by the state. Both could change payments without removing the need for banks’ lending.',
  ),
  // Traffic congestion
  doc(
    'congestion-pricing',
    'Congestion pricing',
    ['traffic', 'congestion', 'road pricing', 'London', 'Stockholm', 'toll'],
    'Congestion pricing charges drivers to enter a busy zone or use a road at peak times. London’s charge, introduced in 2003, and Stockholm’s, made permanent in 2007, each cut traffic in the charged area by roughly a fifth or more. Revenue is often spent on public transport, which helps public acceptance.',
  ),
  doc(
    'induced-demand',
    'Induced demand: why new lanes fill up',
    ['traffic', 'congestion', 'highways', 'road building'],
    'Adding road capacity in congested cities tends to generate new traffic until the roads are about as congested as before, an effect called induced demand. Studies of US metropolitan areas found that vehicle miles travelled grew roughly in proportion to new lane miles. This is why widening roads rarely solves congestion on its own.',
  ),
  doc(
    'public-transit-congestion',
    'Public transport and traffic congestion',
    ['traffic', 'congestion', 'transit', 'bus lanes', 'metro', 'cycling'],
    'Frequent, reliable public transport gives drivers an alternative and carries many more people per lane than cars. Dedicated bus lanes, safe cycling networks and dense housing near stations all reduce the number of car trips. Such measures work best combined with pricing or parking policies that make driving reflect its costs.',
  ),
  doc(
    'smart-traffic-management',
    'Smart traffic management',
    ['traffic', 'congestion', 'signals', 'sensors', 'technology'],
    'Adaptive traffic signals adjust their timing to measured traffic and can cut delays at intersections by a tenth or more. Real-time information, ramp metering on highways and quick clearing of accidents reduce the congestion caused by incidents. Technology improves the flow of existing roads but does not remove the underlying demand.',
  ),
  // Energy and climate
  doc(
    'climate-change-basics',
    'The basics of climate change',
    ['global warming', 'greenhouse gases', 'CO2', 'carbon dioxide'],
    'Burning fossil fuels has raised the concentration of carbon dioxide in the atmosphere from about 280 parts per million before industrialisation to over 420 today. The planet has warmed by about 1.1 to 1.2 degrees Celsius since the late nineteenth century. Consequences include more intense heatwaves, rising sea levels and changing rainfall patterns.',
  ),
  doc(
    'heat-pumps',
    'Heat pumps',
    ['heating', 'electrification', 'efficiency', 'buildings'],
    'A heat pump moves heat from outside air, the ground or water into a building, delivering two to four units of heat for each unit of electricity it uses. That makes it far more efficient than electric resistance heating and, with a cleaning grid, lower in emissions than gas boilers. Modern models work in cold climates well below freezing.',
  ),
  doc(
    'nuclear-power',
    'Nuclear power',
    ['nuclear', 'fission', 'reactor', 'low-carbon'],
    'Nuclear power plants generate electricity from the heat of uranium fission and emit almost no carbon dioxide while running. They supply about a tenth of the world’s electricity. Debates centre on construction cost and delays, long-term waste storage and safety, weighed against reliable low-carbon output.',
  ),
  doc(
    'grid-storage',
    'Storing renewable electricity',
    ['storage', 'batteries', 'pumped hydro', 'grid', 'renewable energy'],
    'Because solar and wind output varies, grids use storage and flexibility to match supply and demand. Pumped hydro storage holds most of the world’s stored energy, while grid batteries are growing fastest and cover hours rather than seasons. Interconnections between regions and flexible demand also smooth out variability.',
  ),
  // Science
  doc(
    'photosynthesis',
    'Photosynthesis',
    ['biology', 'plants', 'chlorophyll', 'oxygen'],
    'Photosynthesis is the process by which plants, algae and some bacteria use light energy to turn carbon dioxide and water into sugars, releasing oxygen. It takes place in chloroplasts, where the pigment chlorophyll absorbs mostly red and blue light. Nearly all life on Earth depends on it directly or indirectly.',
  ),
  doc(
    'dna-structure',
    'The structure of DNA',
    ['biology', 'genetics', 'double helix', 'Watson', 'Crick', 'Franklin'],
    'DNA is a double helix of two strands held together by pairs of bases: adenine with thymine and guanine with cytosine. Its structure was described in 1953 by James Watson and Francis Crick, building on X-ray images made by Rosalind Franklin and Maurice Wilkins. The sequence of bases encodes the instructions for building proteins.',
  ),
  doc(
    'crispr',
    'CRISPR gene editing',
    ['genetics', 'gene editing', 'Cas9', 'biotechnology'],
    'CRISPR-Cas9 is a tool, adapted from a bacterial immune system, that cuts DNA at a chosen sequence so that genes can be disabled or corrected. Jennifer Doudna and Emmanuelle Charpentier described it as a programmable editing tool in 2012 and received the Nobel Prize in Chemistry in 2020. The first CRISPR-based therapy, for sickle cell disease, was approved in 2023.',
  ),
  doc(
    'plate-tectonics',
    'Plate tectonics',
    ['geology', 'earthquakes', 'continental drift', 'volcanoes'],
    'The Earth’s outer shell is broken into rigid plates that move a few centimetres per year over the hotter mantle below. Most earthquakes and volcanoes occur where plates meet, collide or pull apart. The theory, accepted in the 1960s, explained Alfred Wegener’s earlier idea of continental drift.',
  ),
  doc(
    'black-holes',
    'Black holes',
    ['astronomy', 'physics', 'gravity', 'Event Horizon Telescope'],
    'A black hole is a region where gravity is so strong that nothing, not even light, can escape from inside its event horizon. Stellar black holes form when massive stars collapse; supermassive ones sit at the centres of galaxies. The Event Horizon Telescope published the first image of a black hole’s shadow, in the galaxy M87, in 2019.',
  ),
  doc(
    'speed-of-light',
    'The speed of light',
    ['physics', 'relativity', 'Einstein'],
    'Light travels through a vacuum at exactly 299,792,458 metres per second, a value now used to define the metre. According to Einstein’s special relativity, nothing with mass can reach this speed. Light from the Sun takes about eight minutes to reach the Earth.',
  ),
  doc(
    'quantum-computing',
    'Quantum computing',
    ['physics', 'qubits', 'computers', 'technology'],
    'Quantum computers use qubits, which can be in superpositions of 0 and 1 and become entangled with one another. For some problems, such as simulating molecules or factoring large numbers, they could be vastly faster than classical computers. Current machines are still small and error-prone, and error correction is the main engineering challenge.',
  ),
  doc(
    'large-language-models',
    'Large language models',
    ['AI', 'artificial intelligence', 'LLM', 'machine learning', 'transformer'],
    'Large language models are neural networks, usually transformers, trained on huge amounts of text to predict the next word. They can answer questions, write and summarise text and call tools, but can also state false information confidently. Agents built on them combine a model with tools and rules about when each tool may be used.',
  ),
  doc(
    'water-cycle',
    'The water cycle',
    ['earth science', 'evaporation', 'precipitation', 'climate'],
    'Water evaporates from oceans, lakes and plants, condenses into clouds and falls back as rain or snow. It then flows through rivers and groundwater back to the sea. A warmer atmosphere holds more water vapour, about 7 percent more per degree Celsius, which intensifies heavy rainfall.',
  ),
  // History
  doc(
    'printing-press',
    'The printing press',
    ['history', 'Gutenberg', 'books', 'Renaissance'],
    'Johannes Gutenberg developed printing with movable metal type in Mainz around 1440, and his Bible was printed in the 1450s. Printed books became far cheaper than hand-copied manuscripts and spread across Europe within decades. The press helped drive the Reformation, the Scientific Revolution and rising literacy.',
  ),
  doc(
    'industrial-revolution',
    'The Industrial Revolution',
    ['history', 'steam engine', 'factories', 'Britain'],
    'The Industrial Revolution began in Britain in the late eighteenth century, as steam engines, mechanised textile production and new ways of making iron moved work from homes into factories. It spread to Europe and North America during the nineteenth century. It raised output and living standards over time but also brought crowded cities and harsh working conditions.',
  ),
  doc(
    'moon-landing',
    'The first Moon landing',
    ['history', 'space', 'Apollo 11', 'NASA', 'Armstrong'],
    'On 20 July 1969, Apollo 11 landed on the Moon, and Neil Armstrong and Buzz Aldrin became the first people to walk on its surface while Michael Collins orbited above. Six Apollo missions landed between 1969 and 1972. They brought back about 380 kilograms of lunar rock and soil.',
  ),
  doc(
    'berlin-wall',
    'The fall of the Berlin Wall',
    ['history', 'Cold War', 'Germany', 'reunification'],
    'The Berlin Wall, built in 1961, divided East and West Berlin for 28 years. It opened on 9 November 1989 after mass protests in East Germany, and Germany was reunified on 3 October 1990. Its fall became a symbol of the end of the Cold War.',
  ),
  doc(
    'roman-empire',
    'The Roman Empire',
    ['history', 'Rome', 'antiquity', 'Augustus'],
    'The Roman Empire began when Augustus became the first emperor in 27 BC and at its height ruled the lands around the whole Mediterranean. The western half collapsed in 476 AD, while the eastern half, the Byzantine Empire, lasted until 1453. Roman law, roads, Latin and architecture shaped Europe for centuries.',
  ),
  // Medicine
  doc(
    'vaccines-history',
    'How vaccines began',
    ['medicine', 'vaccination', 'smallpox', 'Jenner', 'immunity'],
    'In 1796 Edward Jenner showed that material from cowpox sores protected people against smallpox, the first vaccine. Vaccines train the immune system to recognise a pathogen without causing the disease. Smallpox was declared eradicated in 1980 after a global vaccination campaign.',
  ),
  doc(
    'penicillin-antibiotics',
    'Penicillin and antibiotic resistance',
    ['medicine', 'antibiotics', 'Fleming', 'bacteria', 'resistance'],
    'Alexander Fleming noticed in 1928 that a mould, Penicillium, killed bacteria; penicillin became a mass-produced drug during the Second World War. Antibiotics made many once-deadly infections curable. Overuse lets resistant bacteria spread, and antimicrobial resistance is now a major global health threat.',
  ),
  doc(
    'hypertension',
    'High blood pressure',
    ['medicine', 'hypertension', 'heart disease', 'stroke', 'cardiovascular'],
    'High blood pressure, or hypertension, usually causes no symptoms but raises the risk of heart attack, stroke and kidney disease. Over a billion adults worldwide have it, and many do not know. Less salt, regular exercise, a healthy weight and, when needed, inexpensive medicines bring it under control.',
  ),
  doc(
    'sleep-health',
    'Sleep and health',
    ['medicine', 'sleep', 'health', 'circadian rhythm'],
    'Adults generally need seven to nine hours of sleep a night. Chronic short sleep is linked to impaired attention and memory, weight gain, and higher risks of diabetes and heart disease. Regular sleep times, daylight in the morning and a dark, cool bedroom improve sleep quality.',
  ),
  doc(
    'exercise-benefits',
    'The benefits of physical activity',
    ['medicine', 'exercise', 'health', 'fitness'],
    'Health guidelines recommend at least 150 minutes of moderate activity, such as brisk walking, per week for adults, plus muscle-strengthening exercise twice a week. Regular activity lowers the risk of heart disease, type 2 diabetes, several cancers and depression. Even small amounts help people who are currently inactive.',
  ),
]);
